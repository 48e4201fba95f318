// Several threads allocating, writing and freeing at once, while another
// reads statistics, prints the summary and trims: blocks stay private to their
// owner and the counters add up. Run under ThreadSanitizer too (docs/memory.md).
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "nimbus/device/backend.h"
#include "nimbus/device/bfc_allocator.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus {
namespace {

// One thread's random work: blocks of 1 B to 1 MiB, each filled with the
// thread's byte and checked before release.
void churn(Allocator& allocator, int thread, int operations, MemoryTag tag) {
  AllocationTagScope scope(tag);
  std::mt19937_64 rng(100 + thread);
  std::vector<std::pair<unsigned char*, size_t>> live;
  const auto mark = static_cast<unsigned char>(thread + 1);
  auto release = [&](size_t i) {
    auto [ptr, bytes] = live[i];
    for (size_t k = 0; k < bytes; k += 512) ASSERT_EQ(ptr[k], mark) << "thread " << thread << ": block overwritten";
    ASSERT_EQ(ptr[bytes - 1], mark);
    allocator.deallocate(ptr, bytes);
    live[i] = live.back();
    live.pop_back();
  };
  for (int op = 0; op < operations; ++op) {
    if (live.size() < 64 && (live.empty() || rng() % 2 == 0)) {
      const size_t bytes = 1 + rng() % (rng() % 8 == 0 ? (1 << 20) : 4096);
      auto* ptr = static_cast<unsigned char*>(allocator.allocate(bytes));
      for (size_t k = 0; k < bytes; k += 512) ptr[k] = mark;
      ptr[bytes - 1] = mark;
      live.emplace_back(ptr, bytes);
    } else {
      release(rng() % live.size());
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  while (!live.empty()) {
    release(live.size() - 1);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(BfcConcurrency, ThreadsShareOneAllocator) {
  BfcAllocator allocator("cpu:test", make_host_sub_allocator());
  constexpr int kThreads = 4;
  constexpr int kOperations = 40000;
  const MemoryTag tags[kThreads] = {MemoryTag::kActivations, MemoryTag::kGradients, MemoryTag::kInputBatches,
                                    MemoryTag::kWorkspace};
  std::atomic<bool> done{false};
  std::thread observer([&] {
    while (!done.load()) {
      const AllocatorStats s = allocator.stats();
      EXPECT_LE(s.bytes_in_blocks, s.bytes_reserved);
      EXPECT_FALSE(allocator.summary().empty());
      allocator.trim();
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] { churn(allocator, t, kOperations, tags[t]); });
  }
  for (std::thread& w : workers) w.join();
  done = true;
  observer.join();

  allocator.check_consistency();
  const AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.live_allocations, 0u);
  for (const MemoryTag tag : tags) {
    EXPECT_GT(s.tag(tag).peak_bytes_in_use, 0u) << memory_tag_name(tag);
    EXPECT_EQ(s.tag(tag).bytes_in_use, 0u) << memory_tag_name(tag);
  }
  EXPECT_EQ(s.tag(MemoryTag::kUntagged).peak_bytes_in_use, 0u) << "each thread's scope applies to that thread only";
}

TEST(BfcConcurrency, TensorsFromSeveralThreads) {
  // The CPU device's own allocator, as an input pipeline and a training loop use it.
  const uint64_t before = allocator_for(Device::cpu()).stats().bytes_in_use;
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const Tensor x = full({64 + 7 * t, 33}, static_cast<double>(t + 1));
        if (sum(x).item<float>() != static_cast<float>((t + 1) * (64 + 7 * t) * 33)) ++wrong;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(allocator_for(Device::cpu()).stats().bytes_in_use, before);
}

}  // namespace
}  // namespace nimbus
