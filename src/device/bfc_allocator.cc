#include "nimbus/device/bfc_allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <new>

#include "nimbus/base/error.h"
#include "nimbus/base/size_units.h"

namespace nimbus {

namespace {

constexpr size_t round_up(size_t value, size_t unit) { return (value + unit - 1) / unit * unit; }
constexpr size_t round_down(size_t value, size_t unit) { return value / unit * unit; }

}  // namespace

BfcAllocator::BfcAllocator(std::string device_name, std::unique_ptr<SubAllocator> sub_allocator, MemoryOptions options)
    : device_name_(std::move(device_name)), sub_allocator_(std::move(sub_allocator)) {
  NIMBUS_ASSERT(sub_allocator_ != nullptr) << "BFC allocator for " << device_name_ << " without a sub-allocator";
  bin_heads_.fill(kNoChunk);
  configure(options);
}

BfcAllocator::~BfcAllocator() {
  for (const Region& region : regions_) {
    sub_allocator_->free_region(reinterpret_cast<void*>(region.base), region.size);
  }
}

std::string BfcAllocator::name() const { return fmt::format("bfc on {} ({})", device_name_, sub_allocator_->name()); }

// Sizes in granules: 1-3 have a bin each, then each power of two [2^k, 2^(k+1)) four bins of equal width.
inline size_t BfcAllocator::bin_for(size_t size) {
  const size_t granules = size / kGranule;
  if (granules < 4) return granules;
  const size_t log2 = std::bit_width(granules) - 1;
  return 4 * (log2 - 1) + ((granules >> (log2 - 2)) & 3);
}

inline BfcAllocator::ChunkId BfcAllocator::new_chunk() {
  if (!spare_chunks_.empty()) {
    const ChunkId id = spare_chunks_.back();
    spare_chunks_.pop_back();
    chunks_[id] = Chunk{};
    return id;
  }
  NIMBUS_ASSERT(chunks_.size() < kNoChunk) << "more than 2^32 chunks";
  chunks_.emplace_back();
  return static_cast<ChunkId>(chunks_.size() - 1);
}

inline void BfcAllocator::insert_free(ChunkId id) {
  Chunk& chunk = chunks_[id];
  const size_t bin = bin_for(chunk.size);
  chunk.bin = static_cast<uint32_t>(bin);
  chunk.bin_prev = kNoChunk;
  chunk.bin_next = bin_heads_[bin];
  if (chunk.bin_next != kNoChunk) chunks_[chunk.bin_next].bin_prev = id;
  bin_heads_[bin] = id;
  bin_bitmap_[bin / 64] |= uint64_t{1} << (bin % 64);
}

inline void BfcAllocator::remove_free(ChunkId id) {
  const Chunk& chunk = chunks_[id];
  if (chunk.bin_prev != kNoChunk) {
    chunks_[chunk.bin_prev].bin_next = chunk.bin_next;
  } else {
    bin_heads_[chunk.bin] = chunk.bin_next;
    if (chunk.bin_next == kNoChunk) bin_bitmap_[chunk.bin / 64] &= ~(uint64_t{1} << (chunk.bin % 64));
  }
  if (chunk.bin_next != kNoChunk) chunks_[chunk.bin_next].bin_prev = chunk.bin_prev;
}

inline BfcAllocator::ChunkId BfcAllocator::find_fit(size_t size) const {
  const size_t first = bin_for(size);
  for (size_t word = first / 64; word < bin_bitmap_.size(); ++word) {
    uint64_t bits = bin_bitmap_[word];
    if (word == first / 64) bits &= ~uint64_t{0} << (first % 64);
    for (; bits != 0; bits &= bits - 1) {
      const size_t bin = word * 64 + std::countr_zero(bits);
      ChunkId best = kNoChunk;
      for (ChunkId id = bin_heads_[bin]; id != kNoChunk; id = chunks_[id].bin_next) {
        const Chunk& chunk = chunks_[id];
        if (chunk.size < size || (best != kNoChunk && chunk.size >= chunks_[best].size)) continue;
        best = id;
        if (chunk.size == size) break;
      }
      if (best != kNoChunk) return best;
    }
  }
  return kNoChunk;
}

size_t BfcAllocator::largest_free_block() const {
  for (size_t word = bin_bitmap_.size(); word-- > 0;) {
    if (bin_bitmap_[word] == 0) continue;
    const size_t bin = word * 64 + 63 - std::countl_zero(bin_bitmap_[word]);
    size_t largest = 0;
    for (ChunkId id = bin_heads_[bin]; id != kNoChunk; id = chunks_[id].bin_next) {
      largest = std::max(largest, chunks_[id].size);
    }
    return largest;
  }
  return 0;
}

inline BfcAllocator::Region* BfcAllocator::region_of(uintptr_t address) {
  auto it = std::upper_bound(regions_.begin(), regions_.end(), address,
                             [](uintptr_t a, const Region& region) { return a < region.base; });
  if (it == regions_.begin()) return nullptr;
  --it;
  return address < it->base + it->size ? &*it : nullptr;
}

void* BfcAllocator::allocate(size_t bytes) {
  const MemoryTag tag = AllocationTagScope::current();
  std::unique_lock lock(mutex_);
  return allocate_locked(lock, bytes, tag, default_stream_);
}

void* BfcAllocator::allocate(size_t bytes, Stream& stream) {
  const MemoryTag tag = AllocationTagScope::current();
  std::unique_lock lock(mutex_);
  return allocate_locked(lock, bytes, tag, &stream);
}

void BfcAllocator::deallocate_on(void* ptr, size_t bytes, Stream& stream) {
  if (ptr == nullptr) return;
  // Plain frees are on the default stream already, and need no event of their own.
  if (&stream == default_stream_) return deallocate(ptr, bytes);
  std::shared_ptr<Event> done = stream.record();
  std::lock_guard lock(mutex_);
  pending_.push_back({.chunk = live_chunk(ptr, bytes), .stream = &stream, .done = std::move(done)});
}

void BfcAllocator::set_default_stream(Stream* stream) {
  std::lock_guard lock(mutex_);
  default_stream_ = stream;
}

BfcAllocator::ChunkId BfcAllocator::pending_for(const Stream& stream, size_t size) {
  auto best = pending_.end();
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    const size_t candidate = chunks_[it->chunk].size;
    if (it->stream != &stream || candidate < size || candidate > 2 * size) continue;
    if (best == pending_.end() || candidate < chunks_[best->chunk].size) best = it;
  }
  if (best == pending_.end()) return kNoChunk;
  const ChunkId id = best->chunk;
  pending_.erase(best);
  return id;
}

size_t BfcAllocator::free_completed_pending() {
  return std::erase_if(pending_, [&](const PendingFree& pending) {
    if (!pending.done->query()) return false;
    free_chunk(pending.chunk);
    return true;
  });
}

void* BfcAllocator::allocate_locked(std::unique_lock<std::mutex>& lock, size_t bytes, MemoryTag tag, Stream* stream) {
  if (bytes > std::numeric_limits<size_t>::max() / 2) throw_out_of_memory(bytes, bytes);
  const size_t size = bytes == 0 ? kGranule : round_up(bytes, kGranule);
  if (!pending_.empty()) {
    // A block this stream freed: its earlier work comes before anything enqueued on the stream now.
    if (const ChunkId id = stream != nullptr ? pending_for(*stream, size) : kNoChunk; id != kNoChunk) {
      // Reused whole: the old request leaves the counters, the new one enters them.
      Chunk& chunk = chunks_[id];
      account_free(chunk);
      chunk.requested = bytes;
      chunk.tag = tag;
      account_allocation(chunk);
      return reinterpret_cast<void*>(chunk.address);
    }
    // Blocks whose streams have passed their frees are free for every stream.
    free_completed_pending();
  }
  ChunkId id = find_fit(size);
  while (id == kNoChunk) {
    if (grow(size)) {
      id = find_fit(size);
      NIMBUS_ASSERT(id != kNoChunk) << "a new region of at least " << size << " bytes has no chunk that fits";
      break;
    }
    if (pending_.empty()) throw_out_of_memory(bytes, size);
    // Waiting for a stream costs less than failing; the oldest free is the likeliest to be done. Other
    // threads allocate and free meanwhile.
    const std::shared_ptr<Event> oldest = pending_.front().done;
    lock.unlock();
    oldest->synchronize();
    lock.lock();
    std::erase_if(pending_, [&](const PendingFree& pending) {
      if (pending.done != oldest) return false;
      free_chunk(pending.chunk);
      return true;
    });
    free_completed_pending();
    id = find_fit(size);
  }
  void* ptr = take_chunk(id, bytes, size, tag);
  // The block may have been freed on the default stream by work still queued there: this stream's
  // work on it starts after that (a device-side wait; nothing waits on the host).
  if (stream != nullptr && default_stream_ != nullptr && stream != default_stream_) {
    stream->wait(*default_stream_->record());
  }
  return ptr;
}

void* BfcAllocator::take_chunk(ChunkId id, size_t bytes, size_t size, MemoryTag tag) {
  remove_free(id);
  if (chunks_[id].size > size) {
    // The remainder becomes a free chunk of its own; its right neighbour is in
    // use (free neighbours are always merged), so it needs no merging.
    const ChunkId rest = new_chunk();
    Chunk& chunk = chunks_[id];
    Chunk& remainder = chunks_[rest];
    remainder.address = chunk.address + size;
    remainder.size = chunk.size - size;
    remainder.prev = id;
    remainder.next = chunk.next;
    if (chunk.next != kNoChunk) chunks_[chunk.next].prev = rest;
    chunk.next = rest;
    chunk.size = size;
    Region* region = region_of(remainder.address);
    region->chunk_at[(remainder.address - region->base) / kGranule] = rest;
    insert_free(rest);
  }
  Chunk& chunk = chunks_[id];
  chunk.in_use = true;
  chunk.requested = bytes;
  chunk.tag = tag;
  account_allocation(chunk);
  return reinterpret_cast<void*>(chunk.address);
}

void BfcAllocator::account_allocation(const Chunk& chunk) {
  AllocatorStats& c = counters_;
  c.bytes_in_use += chunk.requested;
  c.peak_bytes_in_use = std::max(c.peak_bytes_in_use, c.bytes_in_use);
  c.bytes_in_blocks += chunk.size;
  ++c.num_allocations;
  ++c.live_allocations;
  TagStats& t = c.by_tag[static_cast<size_t>(chunk.tag)];
  t.bytes_in_use += chunk.requested;
  t.peak_bytes_in_use = std::max(t.peak_bytes_in_use, t.bytes_in_use);
  ++t.live_allocations;
  if (recording_) events_.push_back({MemoryEvent::Kind::kAllocate, chunk.address, chunk.requested, chunk.tag});
}

void BfcAllocator::account_free(const Chunk& chunk) {
  AllocatorStats& c = counters_;
  c.bytes_in_use -= chunk.requested;
  c.bytes_in_blocks -= chunk.size;
  --c.live_allocations;
  TagStats& t = c.by_tag[static_cast<size_t>(chunk.tag)];
  t.bytes_in_use -= chunk.requested;
  --t.live_allocations;
  if (recording_) events_.push_back({MemoryEvent::Kind::kFree, chunk.address, chunk.requested, chunk.tag});
}

BfcAllocator::ChunkId BfcAllocator::live_chunk(void* ptr, size_t bytes) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  Region* region = region_of(address);
  NIMBUS_ASSERT(region != nullptr) << device_name_ << ": deallocate(" << ptr << ") of memory this allocator never held";
  const size_t offset = address - region->base;
  const ChunkId id = offset % kGranule == 0 ? region->chunk_at[offset / kGranule] : kNoChunk;
  const bool pending = std::ranges::any_of(pending_, [&](const PendingFree& p) { return p.chunk == id; });
  NIMBUS_ASSERT(id != kNoChunk && chunks_[id].in_use && !pending)
      << device_name_ << ": deallocate(" << ptr << ") of a block that is not live (freed twice?)";
  NIMBUS_ASSERT(chunks_[id].requested == bytes) << device_name_ << ": deallocate(" << ptr << ", " << bytes
                                                << ") of a block allocated with " << chunks_[id].requested << " bytes";
  return id;
}

void BfcAllocator::deallocate(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  free_chunk(live_chunk(ptr, bytes));
}

void BfcAllocator::free_chunk(ChunkId id) {
  Chunk& chunk = chunks_[id];
  account_free(chunk);
  chunk.in_use = false;
  Region* region = region_of(chunk.address);

  // `left` absorbs its right neighbour, which is in no bin.
  auto absorb_next = [&](ChunkId left) {
    Chunk& l = chunks_[left];
    const ChunkId right = l.next;
    const Chunk& r = chunks_[right];
    l.size += r.size;
    l.next = r.next;
    if (r.next != kNoChunk) chunks_[r.next].prev = left;
    region->chunk_at[(r.address - region->base) / kGranule] = kNoChunk;
    spare_chunks_.push_back(right);
  };
  if (chunk.next != kNoChunk && !chunks_[chunk.next].in_use) {
    remove_free(chunk.next);
    absorb_next(id);
  }
  if (chunks_[id].prev != kNoChunk && !chunks_[chunks_[id].prev].in_use) {
    id = chunks_[id].prev;
    remove_free(id);
    absorb_next(id);
  }
  insert_free(id);
}

bool BfcAllocator::grow(size_t size) {
  if (options_.mode == MemoryMode::kPreallocate) return false;
  // Two tries: the second after handing fully free regions back, which makes
  // room under the limit (or on the device) for one region large enough.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const uint64_t reserved = counters_.bytes_reserved;
    const uint64_t available = !options_.limit              ? std::numeric_limits<uint64_t>::max()
                               : *options_.limit > reserved ? *options_.limit - reserved
                                                            : 0;
    if (size <= available) {
      // As large as everything held, so that the reservation doubles.
      size_t bytes = round_up(std::max({size, kRegionGranule, static_cast<size_t>(reserved)}), kRegionGranule);
      bytes = std::min<uint64_t>(bytes, round_down(available, kGranule));
      // The device may refuse a large region yet grant a smaller one.
      while (!add_region(bytes)) {
        if (bytes == size) break;
        bytes = std::max(size, round_up(bytes / 2, kGranule));
      }
      if (counters_.bytes_reserved > reserved) return true;
    }
    if (attempt == 0 && release_free_regions() == 0) return false;
  }
  return false;
}

bool BfcAllocator::add_region(size_t bytes) {
  void* ptr = sub_allocator_->allocate_region(bytes);
  if (ptr == nullptr) return false;
  Region region{.base = reinterpret_cast<uintptr_t>(ptr), .size = bytes, .chunk_at = {}};
  try {
    region.chunk_at.assign(bytes / kGranule, kNoChunk);
  } catch (const std::bad_alloc&) {
    // The host cannot index a region this large (4 bytes per granule): the request fails as out of memory.
    sub_allocator_->free_region(ptr, bytes);
    return false;
  }
  NIMBUS_ASSERT(region.base % kGranule == 0)
      << sub_allocator_->name() << " returned a region at " << ptr << ", not aligned to " << kGranule << " bytes";
  const ChunkId id = new_chunk();
  chunks_[id].address = region.base;
  chunks_[id].size = bytes;
  region.chunk_at[0] = id;
  const auto at = std::upper_bound(regions_.begin(), regions_.end(), region.base,
                                   [](uintptr_t base, const Region& r) { return base < r.base; });
  regions_.insert(at, std::move(region));
  insert_free(id);
  AllocatorStats& c = counters_;
  c.bytes_reserved += bytes;
  c.peak_bytes_reserved = std::max(c.peak_bytes_reserved, c.bytes_reserved);
  ++c.regions;
  ++c.region_reservations;
  return true;
}

uint64_t BfcAllocator::release_free_regions() {
  uint64_t released = 0;
  for (auto it = regions_.begin(); it != regions_.end();) {
    const ChunkId id = it->chunk_at[0];
    if (chunks_[id].in_use || chunks_[id].size != it->size) {
      ++it;
      continue;
    }
    remove_free(id);
    spare_chunks_.push_back(id);
    sub_allocator_->free_region(reinterpret_cast<void*>(it->base), it->size);
    released += it->size;
    counters_.bytes_reserved -= it->size;
    --counters_.regions;
    it = regions_.erase(it);
  }
  return released;
}

uint64_t BfcAllocator::capacity() const {
  std::lock_guard lock(mutex_);
  if (options_.mode == MemoryMode::kPreallocate) return counters_.bytes_reserved;
  const uint64_t device = counters_.bytes_reserved + sub_allocator_->free_memory();
  return options_.limit ? std::min(*options_.limit, device) : device;
}

uint64_t BfcAllocator::trim() {
  std::lock_guard lock(mutex_);
  if (options_.mode == MemoryMode::kPreallocate) return 0;
  free_completed_pending();
  return release_free_regions();
}

bool BfcAllocator::reserve(size_t bytes) {
  std::lock_guard lock(mutex_);
  if (bytes > std::numeric_limits<size_t>::max() / 2) return false;
  const size_t size = round_up(std::max<size_t>(bytes, 1), kGranule);
  free_completed_pending();
  return find_fit(size) != kNoChunk || grow(size);
}

void BfcAllocator::configure(const MemoryOptions& options) {
  validate_memory_options(options);
  std::lock_guard lock(mutex_);
  options_ = options;
  release_free_regions();
  if (options.mode != MemoryMode::kPreallocate) return;
  const uint64_t free_memory = sub_allocator_->free_memory();
  uint64_t bytes = static_cast<uint64_t>(options.fraction * static_cast<double>(free_memory));
  if (options.limit) {
    bytes = std::min(bytes, *options.limit > counters_.bytes_reserved ? *options.limit - counters_.bytes_reserved : 0);
  }
  bytes = round_down(bytes, bytes >= kRegionGranule ? kRegionGranule : kGranule);
  if (bytes == 0) return;
  if (!add_region(bytes)) {
    throw OutOfMemory(fmt::format("{}: preallocate could not reserve {} ({:.0f}% of the {} free)", device_name_,
                                  format_bytes(bytes), 100 * options.fraction, format_bytes(free_memory)),
                      "lower runtime.memory.fraction, or use runtime.memory.mode: growth (NIMBUS_MEMORY_MODE=growth)");
  }
}

MemoryOptions BfcAllocator::options() const {
  std::lock_guard lock(mutex_);
  return options_;
}

AllocatorStats BfcAllocator::stats_locked() const {
  AllocatorStats stats = counters_;
  stats.bytes_limit = options_.limit.value_or(0);
  stats.largest_free_block = largest_free_block();
  return stats;
}

AllocatorStats BfcAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_locked();
}

void BfcAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  counters_.peak_bytes_in_use = counters_.bytes_in_use;
  counters_.peak_bytes_reserved = counters_.bytes_reserved;
  for (TagStats& t : counters_.by_tag) t.peak_bytes_in_use = t.bytes_in_use;
}

void BfcAllocator::throw_out_of_memory(size_t bytes, size_t size) {
  ++counters_.num_ooms;
  const AllocatorStats s = stats_locked();
  std::string by_tag;
  for (size_t t = 0; t < kNumMemoryTags; ++t) {
    if (s.by_tag[t].bytes_in_use == 0) continue;
    by_tag += fmt::format("{}{} {}", by_tag.empty() ? "" : ", ", memory_tag_name(static_cast<MemoryTag>(t)),
                          format_bytes(s.by_tag[t].bytes_in_use));
  }
  const std::string message = fmt::format(
      "{}: out of memory: cannot allocate {} ({} bytes); in use {} in {} allocations, reserved {} in {} region(s), "
      "limit {}, largest free block {} of {} free (fragmentation {:.0f}%), mode {}; in use by tag: {}",
      device_name_, format_bytes(bytes), bytes, format_bytes(s.bytes_in_use), s.live_allocations,
      format_bytes(s.bytes_reserved), s.regions, options_.limit ? format_bytes(*options_.limit) : std::string("none"),
      format_bytes(s.largest_free_block), format_bytes(s.free_bytes()), 100 * s.fragmentation(),
      memory_mode_name(options_.mode), by_tag.empty() ? "none" : by_tag);
  constexpr const char* kSmaller =
      "lower the batch size (gradient accumulation keeps the global batch) or the model's size; memory_summary() "
      "shows what holds the memory";
  std::string hint;
  if (options_.mode == MemoryMode::kPreallocate) {
    hint = fmt::format(
        "the preallocated region is full: raise runtime.memory.fraction, or use runtime.memory.mode: growth "
        "(NIMBUS_MEMORY_MODE=growth); or {}",
        kSmaller);
  } else if (options_.limit && s.bytes_reserved + size > *options_.limit) {
    hint = fmt::format(
        "the limit is reached: raise runtime.memory.limit (NIMBUS_MEMORY_LIMIT) if the device has room; or {}",
        kSmaller);
  } else {
    hint = fmt::format("the device has no more memory: {}; or stop other processes that use it", kSmaller);
  }
  throw OutOfMemory(message, hint);
}

std::string BfcAllocator::summary() const {
  const AllocatorStats s = stats();
  const MemoryOptions options = this->options();
  constexpr int kWidth = 75;
  const std::string rule(kWidth, '=');
  const std::string thin(kWidth, '-');
  std::string out;
  auto line = [&](const std::string& text) { out += fmt::format("|{:<{}}|\n", text, kWidth); };
  auto row = [&](std::string_view metric, const std::string& current, const std::string& peak) {
    out += fmt::format("| {:<36}| {:>16} | {:>16} |\n", metric, current, peak);
  };
  out += "|" + rule + "|\n";
  line(fmt::format(" Nimbus memory summary: {}", device_name_));
  line(fmt::format(" {}", sub_allocator_->name()));
  line(fmt::format(" mode {}, limit {}{}", memory_mode_name(options.mode),
                   options.limit ? format_bytes(*options.limit) : std::string("none"),
                   options.mode == MemoryMode::kPreallocate ? fmt::format(", fraction {}", options.fraction) : ""));
  out += "|" + rule + "|\n";
  row("metric", "current", "peak");
  out += "|" + thin + "|\n";
  row("in use (requested)", format_bytes(s.bytes_in_use), format_bytes(s.peak_bytes_in_use));
  row("in use (blocks of 256 B)", format_bytes(s.bytes_in_blocks), "");
  row("reserved", format_bytes(s.bytes_reserved), format_bytes(s.peak_bytes_reserved));
  row("free in reserved", format_bytes(s.free_bytes()), "");
  row("largest free block", format_bytes(s.largest_free_block), "");
  row("fragmentation (1 - largest / free)", fmt::format("{:.1f}%", 100 * s.fragmentation()), "");
  row("live allocations", fmt::format("{}", s.live_allocations), "");
  row("allocations so far", fmt::format("{}", s.num_allocations), "");
  row("regions (held / reserved so far)", fmt::format("{} / {}", s.regions, s.region_reservations), "");
  row("out-of-memory errors", fmt::format("{}", s.num_ooms), "");
  out += "|" + thin + "|\n";
  row("in use by tag", "", "");
  for (size_t t = 0; t < kNumMemoryTags; ++t) {
    const TagStats& tag = s.by_tag[t];
    row(fmt::format("  {} ({} live)", memory_tag_name(static_cast<MemoryTag>(t)), tag.live_allocations),
        format_bytes(tag.bytes_in_use), format_bytes(tag.peak_bytes_in_use));
  }
  out += "|" + rule + "|\n";
  return out;
}

void BfcAllocator::check_consistency() const {
  std::lock_guard lock(mutex_);
  AllocatorStats walked;
  size_t free_chunks = 0;
  for (size_t r = 0; r < regions_.size(); ++r) {
    const Region& region = regions_[r];
    NIMBUS_ASSERT(r == 0 || regions_[r - 1].base + regions_[r - 1].size <= region.base) << "regions overlap";
    walked.bytes_reserved += region.size;
    uintptr_t expected = region.base;
    ChunkId previous = kNoChunk;
    size_t chunks_here = 0;
    for (ChunkId id = region.chunk_at[0]; id != kNoChunk; id = chunks_[id].next) {
      const Chunk& chunk = chunks_[id];
      NIMBUS_ASSERT(chunk.address == expected) << "chunk at " << chunk.address << ", expected " << expected;
      NIMBUS_ASSERT(chunk.prev == previous) << "chunk at " << chunk.address << " has the wrong left neighbour";
      NIMBUS_ASSERT(chunk.size > 0 && chunk.size % kGranule == 0) << "chunk size " << chunk.size;
      NIMBUS_ASSERT(region.chunk_at[(chunk.address - region.base) / kGranule] == id) << "stale chunk_at entry";
      if (chunk.in_use) {
        // A block a stream took back from its pending frees may be up to twice its request.
        const size_t rounded = round_up(std::max<size_t>(chunk.requested, 1), kGranule);
        NIMBUS_ASSERT(chunk.size >= rounded && chunk.size <= 2 * rounded)
            << "block of " << chunk.size << " bytes for a request of " << chunk.requested;
        walked.bytes_in_use += chunk.requested;
        walked.bytes_in_blocks += chunk.size;
        ++walked.live_allocations;
        TagStats& t = walked.by_tag[static_cast<size_t>(chunk.tag)];
        t.bytes_in_use += chunk.requested;
        ++t.live_allocations;
      } else {
        NIMBUS_ASSERT(previous == kNoChunk || chunks_[previous].in_use) << "two adjacent free chunks";
        ++free_chunks;
      }
      expected += chunk.size;
      previous = id;
      ++chunks_here;
    }
    NIMBUS_ASSERT(expected == region.base + region.size) << "chunks do not tile their region";
    const size_t starts = region.chunk_at.size() - std::count(region.chunk_at.begin(), region.chunk_at.end(), kNoChunk);
    NIMBUS_ASSERT(starts == chunks_here) << starts << " chunk_at entries for " << chunks_here << " chunks";
  }
  size_t binned = 0;
  for (size_t bin = 0; bin < kBins; ++bin) {
    const bool marked = (bin_bitmap_[bin / 64] >> (bin % 64)) & 1;
    NIMBUS_ASSERT(marked == (bin_heads_[bin] != kNoChunk)) << "bitmap disagrees with bin " << bin;
    ChunkId previous = kNoChunk;
    for (ChunkId id = bin_heads_[bin]; id != kNoChunk; id = chunks_[id].bin_next) {
      const Chunk& chunk = chunks_[id];
      NIMBUS_ASSERT(!chunk.in_use && chunk.bin == bin && bin_for(chunk.size) == bin && chunk.bin_prev == previous)
          << "bin " << bin << " holds a chunk of " << chunk.size << " bytes that does not belong there";
      previous = id;
      ++binned;
    }
  }
  NIMBUS_ASSERT(binned == free_chunks) << binned << " chunks in bins, " << free_chunks << " free chunks in regions";
  for (const PendingFree& pending : pending_) {
    NIMBUS_ASSERT(chunks_[pending.chunk].in_use)
        << "a pending block at " << chunks_[pending.chunk].address << " is in a bin, where any stream could take it";
  }
  const AllocatorStats& c = counters_;
  NIMBUS_ASSERT(walked.bytes_reserved == c.bytes_reserved && walked.bytes_in_use == c.bytes_in_use &&
                walked.bytes_in_blocks == c.bytes_in_blocks && walked.live_allocations == c.live_allocations &&
                regions_.size() == c.regions)
      << "counters disagree with the chunks";
  for (size_t t = 0; t < kNumMemoryTags; ++t) {
    NIMBUS_ASSERT(walked.by_tag[t].bytes_in_use == c.by_tag[t].bytes_in_use &&
                  walked.by_tag[t].live_allocations == c.by_tag[t].live_allocations)
        << "tag counters disagree with the chunks: " << memory_tag_name(static_cast<MemoryTag>(t));
  }
}

void BfcAllocator::start_recording() {
  std::lock_guard lock(mutex_);
  recording_ = true;
  events_.clear();
}

std::vector<MemoryEvent> BfcAllocator::stop_recording() {
  std::lock_guard lock(mutex_);
  recording_ = false;
  return std::move(events_);
}

}  // namespace nimbus
