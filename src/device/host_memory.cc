#include "nimbus/device/host_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "nimbus/base/error.h"
#include "nimbus/base/size_units.h"
#include "nimbus/device/backend.h"

namespace nimbus {

namespace {

// Read on every CPU allocation, as the allocation tag is (allocator.cc).
[[gnu::tls_model("initial-exec")]] thread_local bool in_host_scope = false;

constexpr size_t round_up(size_t value, size_t unit) { return (value + unit - 1) / unit * unit; }

// Blocks from aligned_alloc, freed ones kept by size (up to kCachedBytesMax in all) for the next
// request of that size.
class HostAllocator final : public Allocator {
 public:
  static constexpr size_t kCachedBytesMax = size_t{256} << 20;

  std::string name() const override { return "host"; }

  void* allocate(size_t bytes) override {
    const size_t size = block_size(bytes);
    void* data = take_cached(size);
    if (data == nullptr) data = std::aligned_alloc(kAlignment, size);
    if (data == nullptr) {
      throw OutOfMemory(fmt::format("host memory: cannot allocate {} ({} bytes) for the input pipeline; {} in use",
                                    format_bytes(bytes), bytes, format_bytes(in_use_.load())),
                        "the host is out of memory: a smaller data set in memory (a pipeline reads it as it goes), "
                        "smaller pipeline buffers, or a host with more memory");
    }
    num_allocations_.fetch_add(1, std::memory_order_relaxed);
    live_allocations_.fetch_add(1, std::memory_order_relaxed);
    blocks_.fetch_add(size, std::memory_order_relaxed);
    const uint64_t now = in_use_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    uint64_t peak = peak_in_use_.load(std::memory_order_relaxed);
    while (now > peak && !peak_in_use_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
    return data;
  }

  void deallocate(void* ptr, size_t bytes) override {
    const size_t size = block_size(bytes);
    in_use_.fetch_sub(bytes, std::memory_order_relaxed);
    blocks_.fetch_sub(size, std::memory_order_relaxed);
    live_allocations_.fetch_sub(1, std::memory_order_relaxed);
    if (!keep_cached(ptr, size)) std::free(ptr);
  }

  AllocatorStats stats() const override {
    AllocatorStats stats;
    stats.bytes_in_use = in_use_.load(std::memory_order_relaxed);
    stats.peak_bytes_in_use = peak_in_use_.load(std::memory_order_relaxed);
    stats.bytes_in_blocks = blocks_.load(std::memory_order_relaxed);
    stats.num_allocations = num_allocations_.load(std::memory_order_relaxed);
    stats.live_allocations = live_allocations_.load(std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    stats.bytes_reserved = stats.bytes_in_blocks + cached_;
    return stats;
  }

  void reset_peak() override { peak_in_use_.store(in_use_.load()); }

  uint64_t trim() {
    std::lock_guard lock(mutex_);
    for (auto& [size, blocks] : free_) {
      for (void* block : blocks) std::free(block);
    }
    free_.clear();
    return std::exchange(cached_, 0);
  }

 private:
  static size_t block_size(size_t bytes) { return round_up(std::max<size_t>(bytes, 1), kAlignment); }

  void* take_cached(size_t size) {
    std::lock_guard lock(mutex_);
    auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* data = it->second.back();
    it->second.pop_back();
    cached_ -= size;
    return data;
  }

  bool keep_cached(void* ptr, size_t size) {
    std::lock_guard lock(mutex_);
    if (cached_ + size > kCachedBytesMax) return false;
    free_[size].push_back(ptr);
    cached_ += size;
    return true;
  }

  std::atomic<uint64_t> in_use_{0}, peak_in_use_{0}, blocks_{0}, num_allocations_{0}, live_allocations_{0};
  mutable std::mutex mutex_;  // guards free_ and cached_
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

// Never destroyed: tensors held by static objects may outlive any other owner.
HostAllocator& the_host_allocator() {
  static auto* const allocator = new HostAllocator();
  return *allocator;
}

}  // namespace

HostMemoryScope::HostMemoryScope() : previous_(in_host_scope) { in_host_scope = true; }
HostMemoryScope::~HostMemoryScope() { in_host_scope = previous_; }
bool HostMemoryScope::active() { return in_host_scope; }

Allocator& host_allocator() { return the_host_allocator(); }
AllocatorStats host_memory_stats() { return the_host_allocator().stats(); }
uint64_t trim_host_memory() { return the_host_allocator().trim(); }

Allocator& allocator_for_new_tensor(Device device) {
  if (in_host_scope && device.is_cpu()) return the_host_allocator();
  return allocator_for(device);
}

}  // namespace nimbus
