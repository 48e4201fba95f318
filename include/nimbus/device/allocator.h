// Allocators hand out device memory to tensors. Each device has one; the BFC
// allocator (preallocate / growth / limit modes) implements this interface too.
//
//   Allocator& alloc = backend(DeviceType::kCPU).allocator(0);
//   void* p = alloc.allocate(1 << 20);   // throws OutOfMemory with the request size
//   alloc.deallocate(p, 1 << 20);
//   alloc.stats().peak_bytes_in_use;
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace nimbus {

struct AllocatorStats {
  uint64_t bytes_in_use = 0;
  uint64_t peak_bytes_in_use = 0;
  uint64_t bytes_reserved = 0;   // obtained from the system, in use or not
  uint64_t num_allocations = 0;  // allocate() calls so far
};

class Allocator {
 public:
  // Every allocation is aligned to this many bytes (a cache line, and enough for AVX-512).
  static constexpr size_t kAlignment = 64;

  virtual ~Allocator() = default;
  virtual std::string name() const = 0;
  // Never returns null; zero bytes returns a valid unique pointer.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void reset_peak() = 0;
};

// Keeps the in-use and peak counters that every allocator reports.
class AllocationCounters {
 public:
  void on_allocate(size_t bytes);
  void on_deallocate(size_t bytes);
  AllocatorStats snapshot() const;
  void reset_peak();

 private:
  std::atomic<uint64_t> in_use_{0};
  std::atomic<uint64_t> peak_{0};
  std::atomic<uint64_t> count_{0};
};

}  // namespace nimbus
