// The BFC allocator on made-up address ranges: splitting, coalescing, best
// fit, growth, preallocation, trimming, the limit, statistics, tags, the
// summary and misuse.
#include "nimbus/device/bfc_allocator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "memory_test_support.h"
#include "nimbus/base/error.h"

namespace nimbus {
namespace {

using ::testing::AllOf;
using testing::FakeSubAllocator;
using ::testing::HasSubstr;

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * 1024;

struct Fixture {
  std::shared_ptr<FakeSubAllocator::Counts> counts = std::make_shared<FakeSubAllocator::Counts>();
  std::unique_ptr<BfcAllocator> allocator;

  explicit Fixture(MemoryOptions options = {}, uint64_t capacity = uint64_t{1} << 40) {
    allocator = std::make_unique<BfcAllocator>("fake:0", std::make_unique<FakeSubAllocator>(capacity, counts), options);
  }
  BfcAllocator& operator*() { return *allocator; }
  BfcAllocator* operator->() { return allocator.get(); }
};

uintptr_t address(void* ptr) { return reinterpret_cast<uintptr_t>(ptr); }

TEST(BfcAllocator, SplitsARegionAndRoundsToTheGranule) {
  Fixture a;
  EXPECT_EQ(a->stats().bytes_reserved, 0u) << "growth reserves nothing before the first request";
  void* p = a->allocate(1000);
  AllocatorStats s = a->stats();
  EXPECT_EQ(s.bytes_reserved, BfcAllocator::kRegionGranule);
  EXPECT_EQ(s.bytes_in_use, 1000u);
  EXPECT_EQ(s.bytes_in_blocks, 1024u);
  EXPECT_EQ(s.largest_free_block, BfcAllocator::kRegionGranule - 1024);
  EXPECT_EQ(s.fragmentation(), 0.0);
  void* q = a->allocate(1);
  EXPECT_EQ(address(q), address(p) + 1024) << "the next block is cut from the remainder, right after the first";
  EXPECT_EQ(a->stats().bytes_in_blocks, 1024u + BfcAllocator::kGranule);
  EXPECT_EQ(address(p) % BfcAllocator::kGranule, 0u);
  a->check_consistency();
  a->deallocate(p, 1000);
  a->deallocate(q, 1);
  a->check_consistency();
}

TEST(BfcAllocator, ZeroBytesGetsUniqueAlignedBlocks) {
  Fixture a;
  std::set<void*> seen;
  for (int i = 0; i < 100; ++i) {
    void* p = a->allocate(0);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(address(p) % Allocator::kAlignment, 0u);
    EXPECT_TRUE(seen.insert(p).second) << "zero-byte blocks must be unique";
  }
  EXPECT_EQ(a->stats().bytes_in_use, 0u);
  EXPECT_EQ(a->stats().bytes_in_blocks, 100 * BfcAllocator::kGranule);
  for (void* p : seen) a->deallocate(p, 0);
  EXPECT_EQ(a->stats().live_allocations, 0u);
}

TEST(BfcAllocator, CoalescesFreeNeighboursOnRelease) {
  Fixture a;
  void* x = a->allocate(4 * KiB);
  void* y = a->allocate(4 * KiB);
  void* z = a->allocate(4 * KiB);
  const uint64_t tail = BfcAllocator::kRegionGranule - 12 * KiB;
  a->deallocate(y, 4 * KiB);
  AllocatorStats s = a->stats();
  EXPECT_EQ(s.free_bytes(), tail + 4 * KiB);
  EXPECT_EQ(s.largest_free_block, tail) << "y's block sits between two live blocks";
  EXPECT_DOUBLE_EQ(s.fragmentation(), 1.0 - static_cast<double>(tail) / static_cast<double>(tail + 4 * KiB));

  a->deallocate(x, 4 * KiB);  // merges with y's block on its right
  a->check_consistency();
  void* xy = a->allocate(8 * KiB);
  EXPECT_EQ(xy, x) << "x and y merged into one 8 KiB block at x";
  a->deallocate(xy, 8 * KiB);

  a->deallocate(z, 4 * KiB);  // merges with x+y on its left and the tail on its right
  s = a->stats();
  EXPECT_EQ(s.largest_free_block, BfcAllocator::kRegionGranule) << "the whole region is one free chunk again";
  EXPECT_EQ(s.fragmentation(), 0.0);
  a->check_consistency();
  void* whole = a->allocate(BfcAllocator::kRegionGranule);
  EXPECT_EQ(whole, x);
  EXPECT_EQ(a->stats().regions, 1u);
  a->deallocate(whole, BfcAllocator::kRegionGranule);
}

TEST(BfcAllocator, TakesTheBestFit) {
  Fixture a;
  // Holes of 4, 2, 3, 5.5 and 5.25 KiB, each followed by a live block.
  const size_t holes[] = {4 * KiB, 2 * KiB, 3 * KiB, 5632, 5376};
  std::vector<void*> hole_ptrs, fences;
  for (size_t bytes : holes) {
    hole_ptrs.push_back(a->allocate(bytes));
    fences.push_back(a->allocate(256));
  }
  for (size_t i = 0; i < hole_ptrs.size(); ++i) a->deallocate(hole_ptrs[i], holes[i]);
  a->check_consistency();

  void* p = a->allocate(2 * KiB);
  EXPECT_EQ(p, hole_ptrs[1]) << "the exact fit";
  void* q = a->allocate(2560);
  EXPECT_EQ(q, hole_ptrs[2]) << "3 KiB is the smallest hole that holds 2.5 KiB";
  void* r = a->allocate(5 * KiB);
  EXPECT_EQ(r, hole_ptrs[4]) << "5.25 KiB fits 5 KiB better than 5.5 KiB (same bin)";
  void* t = a->allocate(4 * KiB);
  EXPECT_EQ(t, hole_ptrs[0]);
  a->check_consistency();
  a->deallocate(p, 2 * KiB);
  a->deallocate(q, 2560);
  a->deallocate(r, 5 * KiB);
  a->deallocate(t, 4 * KiB);
  for (void* f : fences) a->deallocate(f, 256);
  EXPECT_EQ(a->stats().largest_free_block, a->stats().bytes_reserved);
}

TEST(BfcAllocator, GrowthDoublesTheReservation) {
  Fixture a;
  std::vector<void*> blocks;
  std::vector<uint64_t> reserved;
  for (int i = 0; i < 6; ++i) {
    blocks.push_back(a->allocate(MiB + MiB / 2));
    reserved.push_back(a->stats().bytes_reserved);
  }
  // 2 MiB holds one block; each new region is as large as all before it.
  EXPECT_EQ(reserved, (std::vector<uint64_t>{2 * MiB, 4 * MiB, 8 * MiB, 8 * MiB, 16 * MiB, 16 * MiB}));
  EXPECT_EQ(a.counts->allocations, 4);
  void* big = a->allocate(100 * MiB);
  EXPECT_EQ(a->stats().bytes_reserved, 116 * MiB) << "a request larger than the doubling gets a region of its own size";
  a->deallocate(big, 100 * MiB);
  for (void* p : blocks) a->deallocate(p, MiB + MiB / 2);
  a->check_consistency();
  EXPECT_EQ(a->stats().bytes_reserved, 116 * MiB) << "growth keeps its regions until trimmed";
  EXPECT_EQ(a->stats().peak_bytes_reserved, 116 * MiB);
}

TEST(BfcAllocator, TrimHandsBackFullyFreeRegionsOnly) {
  Fixture a;
  void* first = a->allocate(MiB);
  void* second = a->allocate(3 * MiB);  // a second region of 4 MiB
  ASSERT_EQ(a->stats().regions, 2u);
  a->deallocate(second, 3 * MiB);
  EXPECT_EQ(a->trim(), 4 * MiB);
  AllocatorStats s = a->stats();
  EXPECT_EQ(s.regions, 1u) << "the region holding `first` stays";
  EXPECT_EQ(s.bytes_reserved, 2 * MiB);
  EXPECT_EQ(a.counts->frees, 1);
  EXPECT_EQ(a.counts->held, 2 * MiB);
  a->deallocate(first, MiB);
  EXPECT_EQ(a->trim(), 2 * MiB);
  EXPECT_EQ(a->stats().bytes_reserved, 0u);
  EXPECT_EQ(a.counts->held, 0u);
  EXPECT_EQ(a->trim(), 0u);
  void* again = a->allocate(MiB);
  EXPECT_EQ(a->stats().bytes_reserved, 2 * MiB) << "after a trim, growth starts over";
  a->deallocate(again, MiB);
  a->check_consistency();
}

TEST(BfcAllocator, PreallocateReservesOnceAndNeverGrows) {
  Fixture a({.mode = MemoryMode::kPreallocate, .fraction = 0.5}, 64 * MiB);
  EXPECT_EQ(a.counts->allocations, 1);
  EXPECT_EQ(a->stats().bytes_reserved, 32 * MiB) << "half of the device's 64 MiB";
  std::vector<void*> blocks;
  for (int i = 0; i < 31; ++i) blocks.push_back(a->allocate(MiB));
  EXPECT_EQ(a.counts->allocations, 1);
  EXPECT_EQ(a->trim(), 0u) << "preallocate keeps its region";
  try {
    a->allocate(2 * MiB);
    FAIL() << "no error";
  } catch (const OutOfMemory& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("cannot allocate 2.0 MiB"), HasSubstr("mode preallocate")));
    EXPECT_THAT(e.hint(), HasSubstr("runtime.memory.fraction"));
  }
  EXPECT_EQ(a.counts->allocations, 1);
  EXPECT_EQ(a->stats().region_reservations, 1u);
  for (void* p : blocks) a->deallocate(p, MiB);
  EXPECT_EQ(a->stats().bytes_reserved, 32 * MiB);
}

TEST(BfcAllocator, PreallocateStaysWithinTheLimit) {
  Fixture a({.mode = MemoryMode::kPreallocate, .fraction = 0.9, .limit = 10 * MiB}, 1024 * MiB);
  EXPECT_EQ(a->stats().bytes_reserved, 10 * MiB);
  EXPECT_EQ(a->stats().bytes_limit, 10 * MiB);
}

TEST(BfcAllocator, LimitIsNeverExceededAndOutOfMemorySaysWhy) {
  Fixture a({.limit = 10 * MiB});
  std::vector<void*> blocks;
  for (int i = 0; i < 9; ++i) {
    blocks.push_back(a->allocate(MiB));
    EXPECT_LE(a->stats().bytes_reserved, 10 * MiB);
  }
  EXPECT_EQ(a->stats().bytes_reserved, 10 * MiB) << "the last region is cut to the limit";
  blocks.push_back(a->allocate(MiB));
  const AllocatorStats before = a->stats();
  try {
    a->allocate(3 * MiB / 2);
    FAIL() << "no error";
  } catch (const OutOfMemory& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("fake:0"), HasSubstr("cannot allocate 1.5 MiB (1572864 bytes)"),
                                   HasSubstr("in use 10.0 MiB in 10 allocations"), HasSubstr("reserved 10.0 MiB"),
                                   HasSubstr("limit 10.0 MiB"), HasSubstr("largest free block 0 B"),
                                   HasSubstr("mode growth"), HasSubstr("in use by tag: untagged 10.0 MiB")));
    EXPECT_THAT(e.hint(),
                AllOf(HasSubstr("runtime.memory.limit"), HasSubstr("NIMBUS_MEMORY_LIMIT"), HasSubstr("batch size")));
  }
  const AllocatorStats after = a->stats();
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use) << "a refused request changes nothing";
  EXPECT_EQ(after.num_allocations, before.num_allocations);
  EXPECT_EQ(after.num_ooms, 1u);
  for (void* p : blocks) a->deallocate(p, MiB);
  a->check_consistency();
}

TEST(BfcAllocator, FreeRegionsMakeRoomUnderTheLimit) {
  Fixture a({.limit = 8 * MiB});
  void* x = a->allocate(MiB + MiB / 2);
  void* y = a->allocate(MiB + MiB / 2);
  ASSERT_EQ(a->stats().bytes_reserved, 4 * MiB);
  a->deallocate(x, MiB + MiB / 2);
  a->deallocate(y, MiB + MiB / 2);
  // 5 MiB fits in neither 2 MiB region nor in the 4 MiB left under the limit:
  // the allocator hands both regions back and reserves one of 6 MiB.
  void* z = a->allocate(5 * MiB);
  EXPECT_EQ(a->stats().bytes_reserved, 6 * MiB);
  EXPECT_EQ(a.counts->frees, 2);
  a->deallocate(z, 5 * MiB);
}

// A step's pieces (a 5 MiB batch, then a 6 MiB arena) under a 20 MiB limit, with 7 MiB held in a region
// of 8: grown one by one, the batch takes a region of 8 MiB (as large as all held) and leaves 4 MiB of room
// for the arena; reserved together, one region of 12 MiB holds both.
TEST(BfcAllocator, ReserveMakesOneBlockForPiecesThatGrowthWouldScatter) {
  for (const bool reserve : {false, true}) {
    SCOPED_TRACE(reserve ? "reserved" : "grown piece by piece");
    Fixture a({.limit = 20 * MiB});
    void* held = a->allocate(7 * MiB);
    ASSERT_EQ(a->stats().bytes_reserved, 8 * MiB);
    if (reserve) {
      EXPECT_TRUE(a->reserve(11 * MiB));
      EXPECT_EQ(a->stats().bytes_reserved, 20 * MiB);
      EXPECT_EQ(a->stats().bytes_in_use, 7 * MiB) << "a reservation is free memory";
      EXPECT_TRUE(a->reserve(11 * MiB));
      EXPECT_EQ(a.counts->allocations, 2) << "a free block that holds it already serves a second reservation";
    }
    void* batch = a->allocate(5 * MiB);
    if (reserve) {
      void* arena = a->allocate(6 * MiB);
      a->deallocate(arena, 6 * MiB);
    } else {
      EXPECT_THROW(a->allocate(6 * MiB), OutOfMemory);
    }
    a->deallocate(batch, 5 * MiB);
    a->deallocate(held, 7 * MiB);
    a->check_consistency();
  }
}

TEST(BfcAllocator, ReserveBeyondTheRoomChangesNothingAndThrowsNothing) {
  Fixture growth({.limit = 10 * MiB});
  void* held = growth->allocate(MiB);
  EXPECT_FALSE(growth->reserve(9 * MiB)) << "2 MiB reserved, 8 MiB of room";
  EXPECT_EQ(growth->stats().bytes_reserved, 2 * MiB);
  EXPECT_EQ(growth->stats().num_ooms, 0u);
  growth->deallocate(held, MiB);
  EXPECT_TRUE(growth->reserve(9 * MiB)) << "the fully free region is handed back to make room";
  EXPECT_EQ(growth->stats().bytes_reserved, 10 * MiB);

  Fixture preallocated({.mode = MemoryMode::kPreallocate, .fraction = 0.5}, 16 * MiB);
  EXPECT_TRUE(preallocated->reserve(8 * MiB));
  EXPECT_FALSE(preallocated->reserve(9 * MiB));
  EXPECT_EQ(preallocated.counts->allocations, 1) << "preallocate never grows";
}

TEST(BfcAllocator, SmallerRegionWhenTheDeviceRefusesALargeOne) {
  Fixture a({}, 10 * MiB);
  void* x = a->allocate(3 * MiB);        // region of 4 MiB
  void* y = a->allocate(3 * MiB);        // region of 4 MiB (as large as all held)
  void* z = a->allocate(MiB + MiB / 2);  // fits in neither 1 MiB left: wants 8 MiB, then 4, gets 2
  EXPECT_EQ(a->stats().bytes_reserved, 10 * MiB);
  EXPECT_EQ(a.counts->refusals, 2);
  try {
    a->allocate(2 * MiB);
    FAIL() << "no error";
  } catch (const OutOfMemory& e) {
    EXPECT_THAT(e.hint(), HasSubstr("the device has no more memory"));
  }
  a->deallocate(x, 3 * MiB);
  a->deallocate(y, 3 * MiB);
  a->deallocate(z, MiB + MiB / 2);
  a->check_consistency();
}

TEST(BfcAllocator, StatisticsByTag) {
  Fixture a;
  EXPECT_EQ(AllocationTagScope::current(), MemoryTag::kUntagged);
  void* w = nullptr;
  void* g = nullptr;
  void* act = nullptr;
  {
    AllocationTagScope parameters(MemoryTag::kParameters);
    w = a->allocate(1000);
    {
      AllocationTagScope gradients(MemoryTag::kGradients);
      EXPECT_EQ(AllocationTagScope::current(), MemoryTag::kGradients);
      g = a->allocate(2000);
    }
    EXPECT_EQ(AllocationTagScope::current(), MemoryTag::kParameters) << "the outer scope is back";
  }
  EXPECT_EQ(AllocationTagScope::current(), MemoryTag::kUntagged);
  {
    AllocationTagScope activations(MemoryTag::kActivations);
    act = a->allocate(3000);
  }
  void* other = a->allocate(10);
  AllocatorStats s = a->stats();
  EXPECT_EQ(s.tag(MemoryTag::kParameters).bytes_in_use, 1000u);
  EXPECT_EQ(s.tag(MemoryTag::kGradients).bytes_in_use, 2000u);
  EXPECT_EQ(s.tag(MemoryTag::kActivations).bytes_in_use, 3000u);
  EXPECT_EQ(s.tag(MemoryTag::kUntagged).bytes_in_use, 10u);
  EXPECT_EQ(s.tag(MemoryTag::kParameters).live_allocations, 1u);
  EXPECT_EQ(s.bytes_in_use, 6010u);
  EXPECT_EQ(s.live_allocations, 4u);
  EXPECT_EQ(s.num_allocations, 4u);

  a->deallocate(act, 3000);  // freed outside its scope: still counted against activations
  s = a->stats();
  EXPECT_EQ(s.tag(MemoryTag::kActivations).bytes_in_use, 0u);
  EXPECT_EQ(s.tag(MemoryTag::kActivations).peak_bytes_in_use, 3000u);
  EXPECT_EQ(s.peak_bytes_in_use, 6010u);
  a->reset_peak();
  s = a->stats();
  EXPECT_EQ(s.peak_bytes_in_use, 3010u);
  EXPECT_EQ(s.tag(MemoryTag::kActivations).peak_bytes_in_use, 0u);
  EXPECT_EQ(s.peak_bytes_reserved, s.bytes_reserved);
  a->deallocate(w, 1000);
  a->deallocate(g, 2000);
  a->deallocate(other, 10);
  a->check_consistency();
  for (size_t t = 0; t < kNumMemoryTags; ++t) EXPECT_EQ(a->stats().by_tag[t].bytes_in_use, 0u);
}

TEST(BfcAllocator, TagNames) {
  EXPECT_EQ(memory_tag_name(MemoryTag::kUntagged), "untagged");
  EXPECT_EQ(memory_tag_name(MemoryTag::kOptimizerSlots), "optimizer slots");
  EXPECT_EQ(memory_tag_name(MemoryTag::kInputBatches), "input batches");
}

TEST(BfcAllocator, SummaryIsATableOfTheStatistics) {
  Fixture a({.limit = 64 * MiB});
  AllocationTagScope tag(MemoryTag::kOptimizerSlots);
  void* p = a->allocate(3 * MiB);
  const std::string summary = a->summary();
  EXPECT_THAT(summary, AllOf(HasSubstr("Nimbus memory summary: fake:0"), HasSubstr("mode growth, limit 64.0 MiB"),
                             HasSubstr("in use (requested)"), HasSubstr("reserved"), HasSubstr("largest free block"),
                             HasSubstr("fragmentation"), HasSubstr("optimizer slots (1 live)"), HasSubstr("3.0 MiB"),
                             HasSubstr("4.0 MiB")));
  // Every line is a table row of the same width.
  std::istringstream lines(summary);
  std::string line, first;
  std::getline(lines, first);
  while (std::getline(lines, line)) {
    EXPECT_EQ(line.size(), first.size()) << line;
    EXPECT_EQ(line.front(), '|');
    EXPECT_EQ(line.back(), '|');
  }
  a->deallocate(p, 3 * MiB);
}

TEST(BfcAllocator, RecordsEvents) {
  Fixture a;
  void* before = a->allocate(10);
  a->start_recording();
  void* p = a->allocate(100);
  {
    AllocationTagScope tag(MemoryTag::kWorkspace);
    void* q = a->allocate(200);
    a->deallocate(q, 200);
  }
  a->deallocate(p, 100);
  const std::vector<MemoryEvent> events = a->stop_recording();
  a->deallocate(before, 10);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].kind, MemoryEvent::Kind::kAllocate);
  EXPECT_EQ(events[0].address, address(p));
  EXPECT_EQ(events[0].bytes, 100u);
  EXPECT_EQ(events[1].tag, MemoryTag::kWorkspace);
  EXPECT_EQ(events[2].kind, MemoryEvent::Kind::kFree);
  EXPECT_EQ(events[2].bytes, 200u);
  EXPECT_EQ(events[3].address, address(p));
}

TEST(BfcAllocator, MisuseIsAnInternalErrorNotCorruption) {
  Fixture a;
  void* p = a->allocate(1000);
  EXPECT_THROW(a->deallocate(p, 999), InternalError) << "a size other than the allocation's";
  int local = 0;
  EXPECT_THROW(a->deallocate(&local, 4), InternalError) << "memory the allocator never held";
  EXPECT_THROW(a->deallocate(static_cast<char*>(p) + 64, 936), InternalError) << "inside a block";
  a->deallocate(p, 1000);
  EXPECT_THROW(a->deallocate(p, 1000), InternalError) << "freed twice";
  a->deallocate(nullptr, 0);
  a->check_consistency();
  EXPECT_EQ(a->stats().live_allocations, 0u);
}

TEST(BfcAllocator, HugeRequestIsOutOfMemory) {
  Fixture a;
  EXPECT_THROW(a->allocate(~size_t{0}), OutOfMemory);
  EXPECT_THROW(a->allocate(size_t{1} << 62), OutOfMemory);
  EXPECT_EQ(a->stats().num_ooms, 2u);
  EXPECT_EQ(a->stats().bytes_reserved, 0u);
}

TEST(BfcAllocator, DestructionHandsEveryRegionBack) {
  auto counts = std::make_shared<FakeSubAllocator::Counts>();
  {
    BfcAllocator a("fake:0", std::make_unique<FakeSubAllocator>(uint64_t{1} << 40, counts));
    a.allocate(5 * MiB);  // left live on purpose
    a.allocate(MiB);
  }
  EXPECT_EQ(counts->held, 0u);
  EXPECT_EQ(counts->frees, counts->allocations);
}

TEST(BfcAllocator, ConfigureValidatesAndSwitchesModes) {
  Fixture a({}, 100 * MiB);
  EXPECT_THROW(a->configure({.fraction = 0}), InvalidArgument);
  EXPECT_THROW(a->configure({.fraction = 1.5}), InvalidArgument);
  EXPECT_THROW(a->configure({.limit = 0}), InvalidArgument);
  void* p = a->allocate(MiB);
  a->configure({.mode = MemoryMode::kPreallocate, .fraction = 0.5});
  EXPECT_EQ(a->options().mode, MemoryMode::kPreallocate);
  EXPECT_EQ(a->stats().bytes_reserved, 2 * MiB + 48 * MiB) << "half of the 98 MiB still free, in 2 MiB units";
  a->deallocate(p, MiB);
  a->configure({});
  EXPECT_EQ(a->stats().bytes_reserved, 0u) << "back to growth: both regions were free and are handed back";
}

}  // namespace
}  // namespace nimbus
