// The allocator on a recorded training run (tests/memory/data/README.md):
// growth keeps its reservation within twice the peak in use and stops growing
// once the steps repeat; preallocate reserves once; tags add up.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "memory_test_support.h"
#include "nimbus/base/error.h"
#include "nimbus/device/bfc_allocator.h"
#include "nimbus/device/memory_trace.h"

namespace nimbus {
namespace {

using testing::FakeSubAllocator;
using testing::mlp_trace;
using testing::replay;

TEST(BfcTrace, TheTraceIsATrainingRun) {
  const auto& trace = mlp_trace();
  size_t allocations = 0;
  size_t largest = 0;
  for (const auto& e : trace.events) {
    if (!e.allocate) continue;
    ++allocations;
    largest = std::max(largest, e.bytes);
  }
  EXPECT_GT(allocations, 500u);
  EXPECT_EQ(largest, size_t{4096} * 784 * 4) << "the 4096-image training set";
}

TEST(BfcTrace, GrowthReservesAtMostTwiceThePeakInUse) {
  auto counts = std::make_shared<FakeSubAllocator::Counts>();
  BfcAllocator allocator("fake:0", std::make_unique<FakeSubAllocator>(uint64_t{1} << 40, counts));
  const uint64_t peak = replay(allocator, mlp_trace());
  const AllocatorStats s = allocator.stats();
  EXPECT_GT(peak, uint64_t{8} << 20);
  EXPECT_LE(s.peak_bytes_reserved, 2 * peak) << allocator.summary();
  EXPECT_EQ(s.bytes_in_use, 0u);
  allocator.check_consistency();

  // The same run again reuses the regions it has.
  const int regions = counts->allocations;
  replay(allocator, mlp_trace());
  replay(allocator, mlp_trace());
  EXPECT_EQ(counts->allocations, regions) << "a repeated run reserves nothing new";
  EXPECT_EQ(allocator.stats().peak_bytes_in_use, peak);
}

TEST(BfcTrace, PreallocateReservesOnce) {
  auto counts = std::make_shared<FakeSubAllocator::Counts>();
  BfcAllocator allocator("fake:0", std::make_unique<FakeSubAllocator>(uint64_t{1} << 30, counts),
                         {.mode = MemoryMode::kPreallocate, .fraction = 0.25});
  replay(allocator, mlp_trace());
  replay(allocator, mlp_trace());
  EXPECT_EQ(counts->allocations, 1);
  EXPECT_EQ(allocator.stats().bytes_reserved, uint64_t{256} << 20);
  EXPECT_EQ(allocator.stats().region_reservations, 1u);
  allocator.check_consistency();
}

TEST(BfcTrace, TagsAttributeTheRun) {
  BfcAllocator allocator("fake:0", std::make_unique<FakeSubAllocator>());
  const auto& trace = mlp_trace();
  std::optional<AllocatorStats> before_first_step;
  replay(allocator, trace, [&](size_t i) {
    if (!before_first_step && trace.events[i].allocate && trace.events[i].tag == MemoryTag::kActivations) {
      before_first_step = allocator.stats();
    }
  });
  ASSERT_TRUE(before_first_step.has_value());
  // Before the first forward pass: the MLP's weights and biases, Adam's two
  // slots per parameter, the training set and the first batch.
  constexpr uint64_t kParameterBytes = (784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10) * 4;
  const AllocatorStats& s = *before_first_step;
  EXPECT_EQ(s.tag(MemoryTag::kParameters).bytes_in_use, kParameterBytes);
  EXPECT_EQ(s.tag(MemoryTag::kOptimizerSlots).bytes_in_use, 2 * kParameterBytes);
  EXPECT_EQ(s.tag(MemoryTag::kInputBatches).bytes_in_use, 4096 * (784 * 4 + 8) + 128 * (784 * 4 + 8));
  EXPECT_EQ(s.tag(MemoryTag::kGradients).bytes_in_use, 0u);
  EXPECT_EQ(s.tag(MemoryTag::kUntagged).bytes_in_use, 0u);

  const AllocatorStats end = allocator.stats();
  EXPECT_GT(end.tag(MemoryTag::kActivations).peak_bytes_in_use, 0u);
  EXPECT_GT(end.tag(MemoryTag::kGradients).peak_bytes_in_use, 0u);
  EXPECT_GT(end.tag(MemoryTag::kWorkspace).peak_bytes_in_use, 0u);
  for (const TagStats& t : end.by_tag) EXPECT_EQ(t.bytes_in_use, 0u);
}

TEST(MemoryTrace, RecordedPhasesWriteAndReadBack) {
  BfcAllocator allocator("fake:0", std::make_unique<FakeSubAllocator>());
  void* before = allocator.allocate(64);
  MemoryTrace trace;
  allocator.start_recording();
  void* p = allocator.allocate(1000);
  {
    AllocationTagScope tag(MemoryTag::kGradients);
    void* q = allocator.allocate(0);
    allocator.deallocate(q, 0);
  }
  trace.add(allocator.stop_recording(), "first");
  allocator.start_recording();
  allocator.deallocate(before, 64);  // allocated before recording: left out
  allocator.deallocate(p, 1000);
  trace.add(allocator.stop_recording(), "second");

  ASSERT_EQ(trace.events.size(), 4u);
  EXPECT_EQ(trace.allocations(), 2u);
  EXPECT_EQ(trace.events[1].tag, MemoryTag::kGradients);
  EXPECT_EQ(trace.events[3].id, 0u) << "the release names p's allocation";

  const std::string path = (std::filesystem::temp_directory_path() / "nimbus_memory_trace_test.txt").string();
  write_memory_trace(trace, path, "a test");
  const MemoryTrace read = read_memory_trace(path);
  std::remove(path.c_str());
  ASSERT_EQ(read.events.size(), trace.events.size());
  for (size_t i = 0; i < trace.events.size(); ++i) {
    EXPECT_EQ(read.events[i].allocate, trace.events[i].allocate) << i;
    EXPECT_EQ(read.events[i].id, trace.events[i].id) << i;
    EXPECT_EQ(read.events[i].bytes, trace.events[i].bytes) << i;
    EXPECT_EQ(read.events[i].tag, trace.events[i].tag) << i;
  }
  ASSERT_EQ(read.phases.size(), 2u);
  EXPECT_EQ(read.phases[0].name, "first");
  EXPECT_EQ(read.phases[0].end, 3u);
  EXPECT_EQ(read.phases[1].name, "second");
  EXPECT_EQ(read.phases[1].end, 4u);
  EXPECT_EQ(read.bytes, (std::vector<uint64_t>{1000, 0}));
}

TEST(MemoryTrace, MalformedLinesNameTheFileAndLine) {
  const std::string path = (std::filesystem::temp_directory_path() / "nimbus_memory_trace_bad.txt").string();
  for (const char* text : {"a 0 100 1\nf 1\n", "a 0 100 1\na 5 10 1\n", "a 0 100 9\n", "a 0 100 1\nx 0\n"}) {
    std::ofstream(path) << "# header\n" << text;
    try {
      read_memory_trace(path);
      ADD_FAILURE() << "no error for " << text;
    } catch (const DataError& e) {
      EXPECT_NE(e.message().find(path + ":"), std::string::npos) << e.message();
      EXPECT_NE(e.hint().find("a <id> <bytes> <tag>"), std::string::npos);
    }
  }
  std::remove(path.c_str());
  EXPECT_THROW(read_memory_trace(path), NotFound);
}

}  // namespace
}  // namespace nimbus
