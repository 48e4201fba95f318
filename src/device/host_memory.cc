#include "nimbus/device/host_memory.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iterator>
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

// One thread's kept small blocks (HostAllocator): (size, block), the most recently freed last.
struct ThreadBlocks {
  std::vector<std::pair<size_t, void*>> blocks;
  size_t bytes = 0;
  ~ThreadBlocks();
  uint64_t release();  // frees them all; returns their bytes
};
[[gnu::tls_model("initial-exec")]] thread_local ThreadBlocks thread_blocks;
// Set once this thread's ThreadBlocks is destroyed: a tensor freed later in the thread's exit (by
// another thread-local's destructor) goes to the shared lists.
[[gnu::tls_model("initial-exec")]] thread_local bool thread_blocks_gone = false;

// Blocks from aligned_alloc (from 1 MiB, mmap), freed ones kept by size for the next request of that size: small ones
// first on the thread that freed them (up to kThreadBlocksMax of them and kThreadBytesMax bytes), as
// memory still in that core's cache, where one from the shared lists may carry another core's lines;
// the rest in lists shared by all threads (up to kCachedBytesMax in all). Keeping small blocks at all
// matters: a few tiny aligned blocks per element through malloc churned a pipeline thread's heap and
// slowed the JPEG decode beside them by ~30 us per image.
class HostAllocator final : public Allocator {
 public:
  static constexpr size_t kCachedBytesMax = size_t{256} << 20;
  static constexpr size_t kThreadCachedBelow = size_t{64} << 10;
  static constexpr size_t kThreadBlocksMax = 64;
  static constexpr size_t kKiBStepsFrom = size_t{4} << 10;
  static constexpr size_t kThreadBytesMax = size_t{1} << 20;

  std::string name() const override { return "host"; }

  void* allocate(size_t bytes) override {
    const size_t size = block_size(bytes);
    void* data = take_cached(size);
    if (data == nullptr) data = fresh_block(size);
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
    if (!keep_cached(ptr, size)) free_block(ptr, size);
  }

  AllocatorStats stats() const override {
    AllocatorStats stats;
    stats.bytes_in_use = in_use_.load(std::memory_order_relaxed);
    stats.peak_bytes_in_use = peak_in_use_.load(std::memory_order_relaxed);
    stats.bytes_in_blocks = blocks_.load(std::memory_order_relaxed);
    stats.num_allocations = num_allocations_.load(std::memory_order_relaxed);
    stats.live_allocations = live_allocations_.load(std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    stats.bytes_reserved = stats.bytes_in_blocks + cached_ + thread_cached_.load(std::memory_order_relaxed);
    return stats;
  }

  void reset_peak() override { peak_in_use_.store(in_use_.load()); }

  // A thread's blocks were freed (ThreadBlocks::release).
  void thread_blocks_released(uint64_t bytes) { thread_cached_.fetch_sub(bytes, std::memory_order_relaxed); }

  // The shared lists and the calling thread's blocks (other threads' stay until they end).
  uint64_t trim() {
    const uint64_t own = thread_blocks_gone ? 0 : thread_blocks.release();
    std::lock_guard lock(mutex_);
    for (auto& [size, blocks] : free_) {
      for (void* block : blocks) free_block(block, size);
    }
    free_.clear();
    return own + std::exchange(cached_, 0);
  }

 private:
  // Blocks of a few KiB (a file's contents) come in 1 KiB steps, so that sizes that vary a little
  // from element to element share blocks (not powers of two: blocks of such sizes alias in the cache).
  static size_t block_size(size_t bytes) {
    const size_t size = round_up(std::max<size_t>(bytes, 1), kAlignment);
    return size >= kKiBStepsFrom && size < kThreadCachedBelow ? round_up(size, 1024) : size;
  }

  // Blocks from 1 MiB (a batch's buffer: 19 MB for 128 RGB images of 112x112 in f32) are mapped with
  // their pages in place. Left to fault in as the pipeline's threads fill them, a 4 KiB page at a time,
  // such a buffer cost 12 ms of those threads' time here; populated, 6 ms. Huge pages (MADV_HUGEPAGE)
  // stalled on compaction instead: 6 to 54 ms.
  static constexpr size_t kPopulatedFrom = size_t{1} << 20;
  static void* fresh_block(size_t size) {
    if (size < kPopulatedFrom) return std::aligned_alloc(kAlignment, size);
    void* block = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return block == MAP_FAILED ? nullptr : block;
  }
  static void free_block(void* block, size_t size) {
    if (size < kPopulatedFrom) {
      std::free(block);
    } else {
      munmap(block, size);
    }
  }

  void* take_cached(size_t size) {
    if (size < kThreadCachedBelow && !thread_blocks_gone) {
      auto& blocks = thread_blocks.blocks;
      for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
        if (it->first != size) continue;
        void* data = it->second;
        blocks.erase(std::next(it).base());
        thread_blocks.bytes -= size;
        thread_cached_.fetch_sub(size, std::memory_order_relaxed);
        return data;
      }
    }
    std::lock_guard lock(mutex_);
    auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* data = it->second.back();
    it->second.pop_back();
    cached_ -= size;
    return data;
  }

  // On this thread when small: the oldest of its blocks makes room (into the shared lists), so that
  // the sizes each element takes again stay, and one-off sizes (a file's contents) pass through.
  bool keep_cached(void* ptr, size_t size) {
    if (size >= kThreadCachedBelow || thread_blocks_gone) return keep_shared(ptr, size);
    auto& blocks = thread_blocks.blocks;
    while (!blocks.empty() && (blocks.size() >= kThreadBlocksMax || thread_blocks.bytes + size > kThreadBytesMax)) {
      const auto [oldest_size, oldest] = blocks.front();
      blocks.erase(blocks.begin());
      thread_blocks.bytes -= oldest_size;
      thread_cached_.fetch_sub(oldest_size, std::memory_order_relaxed);
      if (!keep_shared(oldest, oldest_size)) std::free(oldest);
    }
    blocks.emplace_back(size, ptr);
    thread_blocks.bytes += size;
    thread_cached_.fetch_add(size, std::memory_order_relaxed);
    return true;
  }

  bool keep_shared(void* ptr, size_t size) {
    std::lock_guard lock(mutex_);
    if (cached_ + size > kCachedBytesMax) return false;
    free_[size].push_back(ptr);
    cached_ += size;
    return true;
  }

  std::atomic<uint64_t> in_use_{0}, peak_in_use_{0}, blocks_{0}, num_allocations_{0}, live_allocations_{0};
  std::atomic<uint64_t> thread_cached_{0};  // in all threads' ThreadBlocks
  mutable std::mutex mutex_;                // guards free_ and cached_
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

// Never destroyed: tensors held by static objects may outlive any other owner.
HostAllocator& the_host_allocator() {
  static auto* const allocator = new HostAllocator();
  return *allocator;
}

uint64_t ThreadBlocks::release() {
  for (const auto& [size, block] : blocks) std::free(block);
  blocks.clear();
  the_host_allocator().thread_blocks_released(bytes);
  return std::exchange(bytes, 0);
}

ThreadBlocks::~ThreadBlocks() {
  release();
  thread_blocks_gone = true;
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
