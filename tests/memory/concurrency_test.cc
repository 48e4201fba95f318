// Several threads allocating, writing and freeing at once, while another
// reads statistics, prints the summary and trims: blocks stay private to their
// owner and the counters add up; the same with each thread on a stream of its
// own, freeing in stream order and waiting for the others' events under a
// limit. Run under ThreadSanitizer too (docs/memory.md).
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "memory_test_support.h"
#include "nimbus/base/error.h"
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

// One thread's work on its own stream: blocks filled with the thread's byte, freed on the stream. With
// `verify`, nobody but this thread completes its stream's events, so before it finishes its stream the
// blocks it freed must still hold its byte: no other thread got them while they were pending.
void stream_churn(BfcAllocator& allocator, testing::QueuedStream& stream, int thread, int operations, bool verify,
                  std::atomic<int>& ooms) {
  std::mt19937_64 rng(200 + thread);
  std::vector<std::pair<unsigned char*, size_t>> live, pending;
  const auto mark = static_cast<unsigned char>(thread + 1);
  const auto check = [&](const std::pair<unsigned char*, size_t>& block) {
    auto [ptr, bytes] = block;
    for (size_t k = 0; k < bytes; k += 512) ASSERT_EQ(ptr[k], mark) << "thread " << thread << ": block overwritten";
    ASSERT_EQ(ptr[bytes - 1], mark) << "thread " << thread << ": block overwritten";
  };
  for (int op = 0; op < operations && !::testing::Test::HasFatalFailure(); ++op) {
    const uint64_t kind = rng() % 10;
    if (kind < 5 && live.size() < 32) {
      const size_t bytes = 1 + rng() % (rng() % 8 == 0 ? (1 << 20) : 4096);
      unsigned char* ptr = nullptr;
      try {
        ptr = static_cast<unsigned char*>(allocator.allocate(bytes, stream));
      } catch (const OutOfMemory&) {
        ++ooms;
        continue;
      }
      for (size_t k = 0; k < bytes; k += 512) ptr[k] = mark;
      ptr[bytes - 1] = mark;
      live.emplace_back(ptr, bytes);
    } else if (kind < 9 && !live.empty()) {
      const size_t i = rng() % live.size();
      check(live[i]);
      allocator.deallocate_on(live[i].first, live[i].second, stream);
      if (verify) pending.push_back(live[i]);
      live[i] = live.back();
      live.pop_back();
    } else {
      for (const auto& block : pending) check(block);
      pending.clear();
      stream.finish();
    }
  }
  for (const auto& [ptr, bytes] : live) allocator.deallocate_on(ptr, bytes, stream);
  stream.finish();
}

TEST(BfcConcurrency, ThreadsOnStreamsOfTheirOwn) {
  for (const bool limited : {false, true}) {
    SCOPED_TRACE(limited ? "under a limit: threads wait for each other's events" : "without a limit");
    BfcAllocator allocator(
        "cpu:test", make_host_sub_allocator(),
        {.mode = MemoryMode::kGrowth, .limit = limited ? std::optional<uint64_t>(16 << 20) : std::nullopt});
    constexpr int kThreads = 3;
    std::vector<std::unique_ptr<testing::QueuedStream>> streams;
    for (int t = 0; t < kThreads; ++t) streams.push_back(std::make_unique<testing::QueuedStream>());
    std::atomic<bool> done{false};
    std::atomic<int> ooms{0};
    std::thread observer([&] {
      while (!done.load()) {
        EXPECT_LE(allocator.stats().bytes_reserved, limited ? uint64_t{16} << 20 : ~uint64_t{0});
        allocator.trim();
        std::this_thread::yield();
      }
    });
    std::vector<std::thread> workers;
    for (int t = 0; t < kThreads; ++t) {
      workers.emplace_back([&, t] { stream_churn(allocator, *streams[t], t, 20000, !limited, ooms); });
    }
    for (std::thread& w : workers) w.join();
    done = true;
    observer.join();
    allocator.trim();
    allocator.check_consistency();
    EXPECT_EQ(allocator.stats().bytes_in_use, 0u);
    if (!limited) {
      EXPECT_EQ(ooms.load(), 0);
    }
  }
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
