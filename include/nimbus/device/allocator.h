// Allocators hand out device memory to tensors. Each device has one: the BFC
// allocator (nimbus/device/bfc_allocator.h), whose modes and limit
// nimbus/device/memory.h configures.
//
//   Allocator& alloc = backend(DeviceType::kCPU).allocator(0);
//   void* p = alloc.allocate(1 << 20);   // throws OutOfMemory with the request size
//   alloc.deallocate(p, 1 << 20);
//   alloc.stats().peak_bytes_in_use;
//
// Allocations are attributed to the tag of the innermost AllocationTagScope on
// the allocating thread:
//
//   {
//     AllocationTagScope tag(MemoryTag::kOptimizerSlots);
//     m = zeros_like(w);   // counted in stats().by_tag[kOptimizerSlots]
//   }
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nimbus {

// What an allocation holds, for attributing device memory (stats().by_tag, memory summary).
enum class MemoryTag : uint8_t {
  kUntagged,  // allocated outside any AllocationTagScope
  kParameters,
  kGradients,
  kOptimizerSlots,
  kActivations,
  kWorkspace,
  kInputBatches,
};
inline constexpr size_t kNumMemoryTags = 7;

// "untagged", "parameters", "gradients", "optimizer slots", "activations", "workspace", "input batches".
std::string_view memory_tag_name(MemoryTag tag);

// Sets this thread's allocation tag until the scope ends (scopes nest; the innermost wins).
class AllocationTagScope {
 public:
  explicit AllocationTagScope(MemoryTag tag);
  ~AllocationTagScope();
  AllocationTagScope(const AllocationTagScope&) = delete;
  AllocationTagScope& operator=(const AllocationTagScope&) = delete;

  // The tag allocations on this thread get now.
  static MemoryTag current();

 private:
  MemoryTag previous_;
};

struct TagStats {
  uint64_t bytes_in_use = 0;
  uint64_t peak_bytes_in_use = 0;
  uint64_t live_allocations = 0;
};

struct AllocatorStats {
  // Bytes that live allocations asked for.
  uint64_t bytes_in_use = 0;
  uint64_t peak_bytes_in_use = 0;
  // Obtained from the system (the device), in use or not.
  uint64_t bytes_reserved = 0;
  // allocate() calls so far.
  uint64_t num_allocations = 0;

  // The blocks that live allocations occupy: bytes_in_use rounded up to the allocator's granule.
  uint64_t bytes_in_blocks = 0;
  uint64_t peak_bytes_reserved = 0;
  // The most this allocator may reserve; 0 when it has no limit.
  uint64_t bytes_limit = 0;
  // The largest request that fits without reserving more.
  uint64_t largest_free_block = 0;
  uint64_t live_allocations = 0;
  // Regions held now, and obtained from the system so far.
  uint64_t regions = 0;
  uint64_t region_reservations = 0;
  // Requests refused with OutOfMemory.
  uint64_t num_ooms = 0;
  // bytes_in_use, its peak and live_allocations by MemoryTag.
  std::array<TagStats, kNumMemoryTags> by_tag{};

  // Reserved bytes outside live blocks.
  uint64_t free_bytes() const { return bytes_reserved - bytes_in_blocks; }
  // 1 − largest free block / free bytes: 0 when the free memory is one block
  // (or there is none), near 1 when it is scattered in small pieces.
  double fragmentation() const;
  const TagStats& tag(MemoryTag t) const { return by_tag[static_cast<size_t>(t)]; }
};

class Allocator {
 public:
  // Every allocation is aligned to this many bytes (a cache line, and enough for AVX-512).
  static constexpr size_t kAlignment = 64;

  virtual ~Allocator() = default;
  virtual std::string name() const = 0;
  // Never returns null; zero bytes returns a valid unique pointer.
  virtual void* allocate(size_t bytes) = 0;
  // `bytes` is the size given to allocate().
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual AllocatorStats stats() const = 0;
  // Sets the peaks (in use, reserved, and by tag) to the current values.
  virtual void reset_peak() = 0;
};

}  // namespace nimbus
