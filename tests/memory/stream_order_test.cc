// Stream-ordered frees in the BFC allocator (the GPU's case): a block freed on a stream is reused at once
// by the same stream and by others only after the stream has passed the free. The streams here are
// queues whose recorded events complete when the test says so (testing::QueuedStream), as a GPU's would
// when its kernels finish: a CUDA event cannot run on this machine (tests/gpu has the CUDA version).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "memory_test_support.h"
#include "nimbus/base/error.h"
#include "nimbus/device/bfc_allocator.h"

namespace nimbus {
namespace {

using testing::FakeSubAllocator;
using testing::QueuedStream;

constexpr size_t MiB = 1024 * 1024;

BfcAllocator make_allocator(MemoryOptions options = {}) {
  return BfcAllocator("fake:0", std::make_unique<FakeSubAllocator>(), options);
}

TEST(StreamOrder, TheSameStreamReusesAFreedBlockAtOnce) {
  BfcAllocator allocator = make_allocator();
  QueuedStream stream;
  void* p = allocator.allocate(MiB, stream);
  allocator.deallocate_on(p, MiB, stream);
  ASSERT_FALSE(stream.events.back()->query()) << "the kernels that read p are still queued";
  EXPECT_EQ(allocator.allocate(MiB, stream), p);
  EXPECT_EQ(allocator.stats().bytes_in_use, MiB);
  allocator.check_consistency();
}

TEST(StreamOrder, AnotherStreamWaitsUntilTheFreeingStreamHasPassedTheFree) {
  BfcAllocator allocator = make_allocator();
  QueuedStream compute, copy;
  void* p = allocator.allocate(MiB, compute);
  allocator.deallocate_on(p, MiB, compute);
  EXPECT_EQ(allocator.stats().bytes_in_use, MiB) << "a pending block counts as in use";
  void* q = allocator.allocate(MiB, copy);
  const auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(q);
  EXPECT_TRUE(b >= a + MiB || b + MiB <= a) << "the copy stream got memory the compute stream may still read";
  compute.finish();
  EXPECT_EQ(allocator.allocate(MiB, copy), p) << "once the event completed, the block is free for every stream";
  EXPECT_EQ(compute.events.back()->waits, 0) << "nobody waited: the allocator only queried the event";
  allocator.check_consistency();
}

TEST(StreamOrder, WaitsForPendingFreesRatherThanRunOutOfMemory) {
  BfcAllocator allocator = make_allocator({.mode = MemoryMode::kGrowth, .limit = 2 * MiB});
  QueuedStream compute, copy;
  void* p = allocator.allocate(2 * MiB, compute);
  allocator.deallocate_on(p, 2 * MiB, compute);
  EXPECT_EQ(allocator.allocate(2 * MiB, copy), p);
  EXPECT_EQ(compute.events.back()->waits, 1) << "the limit left no room: the allocator waited for the stream";
  EXPECT_EQ(allocator.stats().bytes_reserved, 2 * MiB);
  allocator.check_consistency();
}

TEST(StreamOrder, FreeingAPendingBlockAgainIsAnInternalError) {
  BfcAllocator allocator = make_allocator();
  QueuedStream stream;
  void* p = allocator.allocate(MiB, stream);
  allocator.deallocate_on(p, MiB, stream);
  EXPECT_THROW(allocator.deallocate(p, MiB), InternalError);
  EXPECT_THROW(allocator.deallocate_on(p, MiB, stream), InternalError);
  allocator.check_consistency();
}

TEST(StreamOrder, PlainAllocationsTakeABlockFreedOnAStreamOnlyAfterItsEvent) {
  BfcAllocator allocator = make_allocator({.mode = MemoryMode::kGrowth, .limit = 2 * MiB});
  QueuedStream compute;
  void* p = allocator.allocate(2 * MiB, compute);
  allocator.deallocate_on(p, 2 * MiB, compute);
  EXPECT_EQ(allocator.allocate(MiB), p) << "the limit left no room: the plain allocation waited for the stream";
  EXPECT_EQ(compute.events.back()->waits, 1);
  allocator.check_consistency();
}

TEST(StreamOrder, WaitsForTheOldestPendingFreeFirst) {
  BfcAllocator allocator = make_allocator({.mode = MemoryMode::kPreallocate, .fraction = 1, .limit = 4 * MiB});
  QueuedStream first, second, copy;
  void* a = allocator.allocate(2 * MiB, first);
  void* b = allocator.allocate(2 * MiB, second);
  allocator.deallocate_on(a, 2 * MiB, first);
  allocator.deallocate_on(b, 2 * MiB, second);
  EXPECT_EQ(allocator.allocate(2 * MiB, copy), a);
  EXPECT_EQ(first.events.back()->waits, 1);
  EXPECT_EQ(second.events.back()->waits, 0) << "one completed free was enough";
  EXPECT_FALSE(second.events.back()->query());
  allocator.check_consistency();
}

TEST(StreamOrder, WithADefaultStreamPlainCallsAreOnItAndOtherStreamsWaitForItOnTheDevice) {
  BfcAllocator allocator = make_allocator();
  QueuedStream compute, copy;
  allocator.set_default_stream(&compute);
  void* p = allocator.allocate(MiB);
  allocator.deallocate(p, MiB);
  EXPECT_TRUE(compute.events.empty()) << "a plain free records no event";
  EXPECT_EQ(allocator.allocate(MiB, copy), p);
  ASSERT_NE(copy.waited_for, nullptr) << "the copy stream got a block the compute stream may still read";
  EXPECT_EQ(copy.waited_for->stream, &compute);
  EXPECT_EQ(copy.waited_for->position, compute.enqueued()) << "the wait follows the free";
  allocator.deallocate_on(p, MiB, copy);
  void* q = allocator.allocate(MiB);
  EXPECT_NE(q, p) << "a plain allocation, on the compute stream, took the copy stream's pending block";
  copy.finish();
  allocator.deallocate(q, MiB);
  EXPECT_EQ(allocator.trim(), 2 * MiB);
  EXPECT_EQ(allocator.stats().bytes_in_use, 0u);
  allocator.check_consistency();
}

// Property: seeded random allocations and frees on 2 or 3 streams (and plain ones), with the streams'
// work finishing in random steps, checked against a shadow of the live and pending blocks: no block
// is handed to a stream while it overlaps a live block or a block another stream freed whose event
// has not completed; a stream gets back a block it freed at once when one fits (at most twice the
// request); what is in use is the live blocks plus the pending ones; the limit holds; and at the end
// nothing is in use.
struct StreamCase {
  uint64_t seed;
  int streams;
  std::optional<uint64_t> limit;
  bool default_stream;
};

class StreamOrderProperty : public ::testing::TestWithParam<StreamCase> {};

TEST_P(StreamOrderProperty, NoBlockReachesAnotherStreamBeforeItsEvent) {
  const StreamCase c = GetParam();
  BfcAllocator allocator = make_allocator({.mode = MemoryMode::kGrowth, .limit = c.limit});
  std::vector<std::unique_ptr<QueuedStream>> streams;
  for (int s = 0; s < c.streams; ++s) streams.push_back(std::make_unique<QueuedStream>());
  if (c.default_stream) allocator.set_default_stream(streams[0].get());
  std::mt19937_64 rng(c.seed);
  const auto draw = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };

  struct Block {
    size_t chunk;      // what the block occupies
    size_t requested;  // what it was allocated with
    int stream;        // the stream it was allocated or freed on; -1 for plain calls without a default stream
    std::shared_ptr<QueuedStream::QueuedEvent> done;  // pending blocks: the event of their free
  };
  std::map<uintptr_t, Block> live, pending;
  const auto overlapping = [](std::map<uintptr_t, Block>& blocks, uintptr_t address, size_t size) {
    std::vector<std::map<uintptr_t, Block>::iterator> found;
    auto it = blocks.upper_bound(address);
    if (it != blocks.begin()) --it;
    for (; it != blocks.end() && it->first < address + size; ++it) {
      if (it->first + it->second.chunk > address) found.push_back(it);
    }
    return found;
  };
  const auto forget_completed = [&] { std::erase_if(pending, [](const auto& p) { return p.second.done->query(); }); };

  size_t reused = 0, waited_on_device = 0, ooms = 0;
  constexpr int kOperations = 300000;
  for (int op = 0; op < kOperations; ++op) {
    const uint64_t kind = draw(100);
    // -1: a plain call (on the default stream when there is one).
    const int stream = draw(4) == 0 ? -1 : static_cast<int>(draw(c.streams));
    const int effective = stream == -1 && c.default_stream ? 0 : stream;
    if (kind < 45 || live.empty()) {
      const size_t bytes = draw(8) == 0 ? 1 + draw(4 * MiB) : draw(64 * 1024);
      const size_t size = bytes == 0 ? 256 : (bytes + 255) / 256 * 256;
      // A block this stream freed that the allocator must hand back at once: the smallest that fits.
      std::optional<size_t> same_stream;
      if (effective >= 0) {
        for (const auto& [address, block] : pending) {
          if (block.stream == effective && block.chunk >= size && block.chunk <= 2 * size) {
            same_stream = std::min(same_stream.value_or(block.chunk), block.chunk);
          }
        }
      }
      if (c.default_stream && effective > 0) streams[effective]->waited_for = nullptr;
      void* ptr = nullptr;
      try {
        ptr = stream == -1 ? allocator.allocate(bytes) : allocator.allocate(bytes, *streams[stream]);
      } catch (const OutOfMemory&) {
        ASSERT_TRUE(c.limit.has_value()) << "out of memory without a limit";
        ++ooms;
        forget_completed();
        continue;
      }
      const auto address = reinterpret_cast<uintptr_t>(ptr);
      ASSERT_EQ(address % 256, 0u);
      ASSERT_TRUE(overlapping(live, address, size).empty()) << "op " << op << ": two live blocks overlap";
      size_t chunk = size;
      for (auto it : overlapping(pending, address, size)) {
        const Block& freed = it->second;
        if (freed.stream == effective && it->first == address && same_stream) {
          chunk = freed.chunk;  // taken back whole
        } else {
          ASSERT_TRUE(freed.done->query()) << "op " << op << ": stream " << effective << " got a block that stream "
                                           << freed.stream << " freed before its event completed";
        }
        pending.erase(it);
      }
      if (same_stream) {
        ASSERT_EQ(chunk, *same_stream) << "op " << op << ": stream " << effective
                                       << " did not get back the block it freed at once";
        ++reused;
      } else {
        forget_completed();  // the allocator frees completed blocks when it takes none back
      }
      if (c.default_stream && effective > 0 && !same_stream) {
        ASSERT_NE(streams[effective]->waited_for, nullptr) << "op " << op << ": no wait for the default stream";
        ASSERT_EQ(streams[effective]->waited_for->stream, streams[0].get());
        ASSERT_EQ(streams[effective]->waited_for->position, streams[0]->enqueued());
        ++waited_on_device;
      }
      live[address] = {.chunk = chunk, .requested = bytes, .stream = effective, .done = nullptr};
    } else if (kind < 90) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(draw(live.size())));
      Block block = it->second;
      void* ptr = reinterpret_cast<void*>(it->first);
      if (stream == -1) {
        allocator.deallocate(ptr, block.requested);
      } else if (c.default_stream && stream == 0) {
        allocator.deallocate_on(ptr, block.requested, *streams[0]);  // the same as a plain free
      } else {
        allocator.deallocate_on(ptr, block.requested, *streams[stream]);
        block.stream = stream;
        block.done = streams[stream]->events.back();
        pending[it->first] = block;
      }
      live.erase(it);
    } else if (kind < 99) {
      // Some of a stream's work finishes.
      QueuedStream& s = *streams[draw(c.streams)];
      s.finish_to(s.finished() + static_cast<int64_t>(draw(static_cast<uint64_t>(s.enqueued() - s.finished()) + 1)));
    } else {
      allocator.trim();
      forget_completed();
    }
    const AllocatorStats stats = allocator.stats();
    if (c.limit) {
      ASSERT_LE(stats.bytes_reserved, *c.limit);
    }
    if (op % 1000 == 0) {
      // Pending blocks count as in use until the allocator frees them (trim frees the completed ones).
      allocator.trim();
      forget_completed();
      uint64_t shadow = 0;
      for (const auto* blocks : {&live, &pending}) {
        for (const auto& [address, block] : *blocks) shadow += block.requested;
      }
      ASSERT_EQ(allocator.stats().bytes_in_use, shadow) << "op " << op;
      allocator.check_consistency();
    }
  }
  for (auto& [address, block] : live) allocator.deallocate(reinterpret_cast<void*>(address), block.requested);
  for (auto& s : streams) s->finish();
  allocator.trim();
  allocator.check_consistency();
  EXPECT_EQ(allocator.stats().bytes_in_use, 0u);
  EXPECT_EQ(allocator.stats().live_allocations, 0u);
  EXPECT_GT(reused, 1000u) << "the sequence should exercise same-stream reuse";
  if (c.default_stream) {
    EXPECT_GT(waited_on_device, 1000u);
  }
  RecordProperty("reused", static_cast<int>(reused));
  RecordProperty("ooms", static_cast<int>(ooms));
}

INSTANTIATE_TEST_SUITE_P(Seeds, StreamOrderProperty,
                         ::testing::Values(StreamCase{11, 2, std::nullopt, false},
                                           StreamCase{12, 3, std::nullopt, false}, StreamCase{13, 3, 24 * MiB, false},
                                           StreamCase{14, 2, 16 * MiB, true}, StreamCase{15, 3, std::nullopt, true}));

}  // namespace
}  // namespace nimbus
