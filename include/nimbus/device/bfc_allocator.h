// The best-fit-with-coalescing (BFC) allocator that serves every device's
// tensors, after TensorFlow's: memory comes in large regions from a
// SubAllocator (aligned_alloc / mmap on the CPU, cudaMalloc on CUDA); a region
// is cut into chunks, split on allocation and merged with free neighbours on
// release, and free chunks wait in size-class bins for the next request.
//
//   BfcAllocator allocator("cpu:0", make_host_sub_allocator(), {.mode = MemoryMode::kGrowth});
//   void* p = allocator.allocate(4096);
//   allocator.deallocate(p, 4096);
//   allocator.trim();                     // hands fully free regions back
//   std::cout << allocator.summary();
//
// Sizes are rounded up to kGranule (256) bytes, so every block is 256-byte
// aligned within its region. Bins: each power of two of granules is split
// into four sub-bins, and a bitmap marks the non-empty ones. A request takes
// the best fit (the smallest chunk; an exact fit ends the search) within the
// first bin, from its own size's, that holds a chunk large enough. Allocation
// and release are O(1) apart from that scan of one bin's free list.
//
// Thread-safe: one mutex, held only while chunks and counters change.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nimbus/device/allocator.h"
#include "nimbus/device/memory.h"
#include "nimbus/device/stream.h"

namespace nimbus {

// Where the BFC allocator gets its regions. Implementations: host memory
// (make_host_sub_allocator, src/device/cpu/host_sub_allocator.cc); CUDA's
// belongs in src/device/cuda/ as cudaMalloc / cudaFree with free_memory from
// cudaMemGetInfo, built only with the toolkit.
class SubAllocator {
 public:
  virtual ~SubAllocator() = default;
  virtual std::string name() const = 0;
  // A region of `bytes` (a multiple of 256) aligned to at least 256 bytes, or
  // null when the device has no memory for it.
  virtual void* allocate_region(size_t bytes) = 0;
  // Returns a region from allocate_region with the same size.
  virtual void free_region(void* ptr, size_t bytes) = 0;
  // Memory the device could give now (preallocate takes its fraction of it).
  virtual uint64_t free_memory() const = 0;
};

// Host memory: regions below 2 MiB from aligned_alloc; larger ones mmap'd on
// 2 MiB boundaries with MADV_HUGEPAGE, since a first touch of a 4 KiB page
// costs ~50 times more than its share of a huge page on VMs. free_memory() is
// MemAvailable from /proc/meminfo.
std::unique_ptr<SubAllocator> make_host_sub_allocator();

// One allocate() or deallocate() seen while recording (BfcAllocator::start_recording).
struct MemoryEvent {
  enum class Kind : uint8_t { kAllocate, kFree };
  Kind kind;
  uintptr_t address;
  uint64_t bytes;
  MemoryTag tag;
};

class BfcAllocator final : public Allocator {
 public:
  static constexpr size_t kGranule = 256;
  // Growth mode's first region, and the unit region sizes are rounded to
  // (a huge page on the CPU; cudaMalloc's granularity on CUDA).
  static constexpr size_t kRegionGranule = size_t{2} << 20;

  // `device_name` names the device in messages and the summary ("cpu:0").
  // Applies `options` as configure() does.
  BfcAllocator(std::string device_name, std::unique_ptr<SubAllocator> sub_allocator, MemoryOptions options = {});
  // Hands every region back, live blocks or not.
  ~BfcAllocator() override;
  BfcAllocator(const BfcAllocator&) = delete;
  BfcAllocator& operator=(const BfcAllocator&) = delete;

  std::string name() const override;
  // Throws OutOfMemory with the request, the statistics and a remedy when
  // neither the free chunks nor a new region (within the mode and limit) can serve it.
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  // Stream-ordered use (the GPU's case, where the host frees a block while kernels that read it are
  // still queued on a stream). deallocate_on records an event (Stream::record) on `stream` and keeps the
  // block pending: allocate on the same stream takes it back at once (when it is at most twice the
  // request; the stream runs its later work after the earlier), other streams and plain allocate()
  // only once the event has completed (Event::query, without waiting). Pending blocks are never merged
  // with their neighbours and count as in use. When nothing else fits and no region can be added, an
  // allocation waits for the oldest pending event, then the next, rather than fail.
  // With a default stream set, plain allocate() and deallocate() are on it (the CUDA backend's compute
  // stream, where every kernel runs): a plain free is reusable on that stream at once, and a block that
  // allocate(bytes, other) takes from the free chunks is handed out only after `other` is made to wait
  // (Stream::wait, on the device, not the host) for an event recorded on the default stream then, which
  // follows every plain free. Without one (the CPU, whose work runs at once) plain calls are stream-less.
  void* allocate(size_t bytes, Stream& stream);
  void deallocate_on(void* ptr, size_t bytes, Stream& stream);
  void set_default_stream(Stream* stream);
  AllocatorStats stats() const override;
  void reset_peak() override;

  // Validates and applies `options` (no environment overrides: configure_memory
  // adds those), trims, then in preallocate mode reserves one region of
  // `fraction` of the sub-allocator's free memory, within the limit.
  void configure(const MemoryOptions& options);
  MemoryOptions options() const;
  // The most bytes live allocations could hold together: in preallocate mode
  // what is reserved; in growth mode the limit, or without one what is
  // reserved plus the device's free memory. The pre-run check compares a
  // step's estimate with this less what is in use.
  uint64_t capacity() const;
  // Hands fully free regions back to the sub-allocator (in growth mode) and
  // returns the bytes released.
  uint64_t trim();
  // Makes one free block of at least `bytes` for allocations that will take it in pieces (a training
  // step's batch, arena and scratch): when no free block is that large, growth mode adds a region for
  // it, as a request of `bytes` would. Each piece grown on its own would take a region as large as
  // everything held, and under a limit that spends room a later, larger piece needs. Returns whether
  // such a block exists now (false in preallocate mode when its region has none, or when the limit or
  // the device leaves no room: nothing is thrown, the pieces are served as they come).
  bool reserve(size_t bytes);
  // A table of the statistics like PyTorch's torch.cuda.memory_summary().
  std::string summary() const;
  // Walks every region and bin and throws InternalError on a broken invariant
  // (chunks that do not tile their region, adjacent free chunks, a free chunk
  // missing from its bin, counters that disagree with the chunks).
  void check_consistency() const;

  // Records every allocate() and deallocate() until stop_recording(), which
  // returns the events (e.g. to replay a training step's sizes, bench/bench_memory.cc).
  void start_recording();
  std::vector<MemoryEvent> stop_recording();

 private:
  using ChunkId = uint32_t;
  static constexpr ChunkId kNoChunk = ~ChunkId{0};
  static constexpr size_t kBins = 256;

  struct Chunk {
    uintptr_t address = 0;
    size_t size = 0;                                   // a multiple of kGranule
    size_t requested = 0;                              // what allocate() was asked for, when in use
    ChunkId prev = kNoChunk, next = kNoChunk;          // address-order neighbours in the region
    ChunkId bin_prev = kNoChunk, bin_next = kNoChunk;  // the free list of bin `bin`, when free
    uint32_t bin = 0;
    bool in_use = false;
    MemoryTag tag = MemoryTag::kUntagged;
  };
  struct Region {
    uintptr_t base = 0;
    size_t size = 0;
    // The chunk starting at each granule of the region (kNoChunk inside chunks).
    std::vector<ChunkId> chunk_at;
  };

  // A block freed on a stream, not yet free for every stream.
  struct PendingFree {
    ChunkId chunk = kNoChunk;
    const Stream* stream = nullptr;
    std::shared_ptr<Event> done;
  };

  // `stream`: the allocating stream, null for plain allocate().
  void* allocate_locked(std::unique_lock<std::mutex>& lock, size_t bytes, MemoryTag tag, Stream* stream);
  void* take_chunk(ChunkId id, size_t bytes, size_t size, MemoryTag tag);
  // A pending block `stream` freed that serves `size` whole, or kNoChunk.
  ChunkId pending_for(const Stream& stream, size_t size);
  // Frees the pending blocks whose events have completed; returns how many.
  size_t free_completed_pending();
  // The live chunk at ptr, checked against the size it was allocated with.
  ChunkId live_chunk(void* ptr, size_t bytes);
  // Frees a live chunk, merging it with free neighbours.
  void free_chunk(ChunkId id);
  void account_allocation(const Chunk& chunk);
  void account_free(const Chunk& chunk);
  static size_t bin_for(size_t size);
  ChunkId new_chunk();
  void insert_free(ChunkId id);
  void remove_free(ChunkId id);
  ChunkId find_fit(size_t size) const;
  size_t largest_free_block() const;
  // Reserves a region that can hold `size` bytes, within the mode and the
  // limit; false when none can be had.
  bool grow(size_t size);
  bool add_region(size_t bytes);
  uint64_t release_free_regions();
  Region* region_of(uintptr_t address);
  AllocatorStats stats_locked() const;
  [[noreturn]] void throw_out_of_memory(size_t bytes, size_t size);

  const std::string device_name_;
  const std::unique_ptr<SubAllocator> sub_allocator_;
  mutable std::mutex mutex_;
  MemoryOptions options_;
  std::vector<Chunk> chunks_;
  std::vector<ChunkId> spare_chunks_;
  std::vector<Region> regions_;  // sorted by base
  std::array<ChunkId, kBins> bin_heads_;
  std::array<uint64_t, kBins / 64> bin_bitmap_{};
  AllocatorStats counters_;           // all but largest_free_block and bytes_limit
  std::vector<PendingFree> pending_;  // oldest first
  Stream* default_stream_ = nullptr;
  bool recording_ = false;
  std::vector<MemoryEvent> events_;
};

}  // namespace nimbus
