// Property tests: seeded random sequences of millions of allocations and
// releases, of sizes from 0 bytes to 32 MiB, checked against a shadow map of
// the live blocks: no two live blocks overlap, every block is aligned, the
// limit is never exceeded, and at the end nothing is in use.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <random>

#include "memory_test_support.h"
#include "nimbus/base/error.h"
#include "nimbus/device/bfc_allocator.h"

namespace nimbus {
namespace {

using testing::FakeSubAllocator;

constexpr size_t MiB = 1024 * 1024;

// Sizes as tensors come: some empty, many small, fewer large.
size_t random_size(std::mt19937_64& rng) {
  const int kind = std::uniform_int_distribution<int>(0, 99)(rng);
  auto between = [&](size_t low, size_t high) { return std::uniform_int_distribution<size_t>(low, high)(rng); };
  if (kind < 5) return 0;
  if (kind < 45) return between(1, 4096);
  if (kind < 80) return between(4097, 256 * 1024);
  if (kind < 95) return between(256 * 1024, 4 * MiB);
  return between(4 * MiB, 32 * MiB);
}

struct Block {
  uintptr_t address;
  size_t bytes;
};

struct Totals {
  size_t allocations = 0;
  size_t ooms = 0;
  uint64_t peak_reserved = 0;
};

// Runs `operations` random allocate/deallocate calls. The live count moves
// towards a target drawn anew every 20,000 operations (between 0 and
// `max_live`), so the sequence both fills the allocator and empties it.
// `write` stamps each block's first and last bytes and checks them on release.
void run_random_operations(BfcAllocator& allocator, uint64_t seed, size_t operations, size_t max_live,
                           std::optional<uint64_t> limit, bool write, Totals& totals) {
  std::mt19937_64 rng(seed);
  std::map<uintptr_t, size_t> shadow;  // address -> block size, of the live blocks
  std::vector<Block> live;
  size_t target = 0;
  auto block_size = [](size_t bytes) { return std::max<size_t>(1, bytes); };
  auto stamp = [](const Block& b) { return static_cast<unsigned char>((b.address >> 8) ^ b.bytes); };

  auto release = [&](size_t index) {
    const Block b = live[index];
    if (write && b.bytes > 0) {
      const auto* bytes = reinterpret_cast<const unsigned char*>(b.address);
      ASSERT_EQ(bytes[0], stamp(b)) << "another block wrote over this one";
      ASSERT_EQ(bytes[b.bytes - 1], stamp(b)) << "another block wrote over this one";
    }
    allocator.deallocate(reinterpret_cast<void*>(b.address), b.bytes);
    shadow.erase(b.address);
    live[index] = live.back();
    live.pop_back();
  };

  for (size_t op = 0; op < operations; ++op) {
    if (op % 20000 == 0) target = std::uniform_int_distribution<size_t>(0, max_live)(rng);
    const bool grow = live.empty() || (live.size() < target ? rng() % 10 != 0 : rng() % 10 == 0);
    if (grow) {
      const size_t bytes = random_size(rng);
      void* ptr = nullptr;
      try {
        ptr = allocator.allocate(bytes);
      } catch (const OutOfMemory&) {
        ++totals.ooms;
        ASSERT_TRUE(limit.has_value()) << "out of memory without a limit, at " << live.size() << " live blocks";
        continue;
      }
      const Block b{reinterpret_cast<uintptr_t>(ptr), bytes};
      ASSERT_EQ(b.address % Allocator::kAlignment, 0u) << "misaligned block for " << bytes << " bytes";
      // The live blocks on either side must end before this one starts and start after it ends.
      const auto next = shadow.lower_bound(b.address);
      ASSERT_TRUE(next == shadow.end() || next->first >= b.address + block_size(bytes))
          << "block of " << bytes << " bytes at " << b.address << " overlaps the live block at " << next->first;
      if (next != shadow.begin()) {
        const auto prev = std::prev(next);
        ASSERT_LE(prev->first + prev->second, b.address)
            << "block at " << b.address << " overlaps the live block at " << prev->first;
      }
      shadow.emplace(b.address, block_size(bytes));
      if (write && bytes > 0) {
        auto* data = reinterpret_cast<unsigned char*>(b.address);
        data[0] = data[bytes - 1] = stamp(b);
      }
      live.push_back(b);
      ++totals.allocations;
    } else {
      release(std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng));
      if (::testing::Test::HasFatalFailure()) return;
    }
    const AllocatorStats s = allocator.stats();
    if (limit) {
      ASSERT_LE(s.bytes_reserved, *limit) << "reserved past the limit after operation " << op;
    }
    ASSERT_LE(s.bytes_in_blocks, s.bytes_reserved);
    ASSERT_EQ(s.live_allocations, live.size());
    if (op % 100000 == 0) allocator.check_consistency();
    if (op % 250000 == 0) allocator.trim();
  }
  while (!live.empty()) {
    release(live.size() - 1);
    if (::testing::Test::HasFatalFailure()) return;
  }
  allocator.check_consistency();
  const AllocatorStats end = allocator.stats();
  EXPECT_EQ(end.bytes_in_use, 0u);
  EXPECT_EQ(end.bytes_in_blocks, 0u);
  EXPECT_EQ(end.live_allocations, 0u);
  for (const TagStats& t : end.by_tag) EXPECT_EQ(t.bytes_in_use, 0u);
  totals.peak_reserved = end.peak_bytes_reserved;
  // With nothing live, each region is one free chunk again: growth hands them all back.
  if (allocator.options().mode == MemoryMode::kGrowth) {
    allocator.trim();
    EXPECT_EQ(allocator.stats().bytes_reserved, 0u);
  } else {
    EXPECT_EQ(end.largest_free_block, end.bytes_reserved);
  }
}

TEST(BfcProperty, RandomOperationsUnderALimit) {
  constexpr uint64_t kLimit = uint64_t{3} << 30;
  for (uint64_t seed : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    auto counts = std::make_shared<FakeSubAllocator::Counts>();
    BfcAllocator allocator("fake:0", std::make_unique<FakeSubAllocator>(uint64_t{1} << 40, counts), {.limit = kLimit});
    Totals totals;
    run_random_operations(allocator, seed, 1'500'000, 1500, kLimit, false, totals);
    if (HasFatalFailure()) return;
    EXPECT_GT(totals.allocations, 700'000u);
    EXPECT_LT(totals.ooms, totals.allocations / 100) << "the limit should refuse only near the largest live sets";
    EXPECT_EQ(counts->held, 0u) << "trim at the end handed every region back";
  }
}

TEST(BfcProperty, RandomOperationsWithoutALimitNeverFail) {
  BfcAllocator allocator("fake:0", std::make_unique<FakeSubAllocator>());
  Totals totals;
  run_random_operations(allocator, 3, 1'000'000, 1000, std::nullopt, false, totals);
  if (HasFatalFailure()) return;
  EXPECT_EQ(totals.ooms, 0u);
}

TEST(BfcProperty, PreallocatedRegionUnderPressure) {
  // A device of 1 GiB preallocated at 0.75: the sequence often runs out, and
  // the allocator must refuse cleanly and keep its single region.
  auto counts = std::make_shared<FakeSubAllocator::Counts>();
  BfcAllocator allocator("fake:0", std::make_unique<FakeSubAllocator>(uint64_t{1} << 30, counts),
                         {.mode = MemoryMode::kPreallocate, .fraction = 0.75});
  Totals totals;
  run_random_operations(allocator, 4, 500'000, 1000, uint64_t{768} << 20, false, totals);
  if (HasFatalFailure()) return;
  EXPECT_GT(totals.ooms, 0u) << "the sequence was meant to exhaust the region";
  EXPECT_EQ(counts->allocations, 1);
  EXPECT_EQ(allocator.stats().region_reservations, 1u);
}

TEST(BfcProperty, RealHostMemoryIsNeverShared) {
  // Host memory, written: a block handed out twice would fail its stamp check.
  constexpr uint64_t kLimit = uint64_t{512} << 20;
  BfcAllocator allocator("cpu:test", make_host_sub_allocator(), {.limit = kLimit});
  Totals totals;
  run_random_operations(allocator, 5, 200'000, 200, kLimit, true, totals);
}

}  // namespace
}  // namespace nimbus
