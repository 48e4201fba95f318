// The in-process collectives: results against sums computed here, and the
// timeout that names the collective, the missing rank and the setting.
#include "nimbus/distribute/collectives.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "train/train_test_util.h"

namespace nimbus::testing {
namespace {

using distribute::Collectives;
using distribute::InProcessGroup;
using distribute::ReduceOp;
using namespace std::chrono_literals;

// Runs body(rank) on one thread per rank; returns each rank's error message ("" when none).
std::vector<std::string> on_every_rank(InProcessGroup& group, const std::function<void(Collectives&)>& body) {
  std::vector<std::string> errors(static_cast<size_t>(group.size()));
  std::vector<std::thread> threads;
  for (int r = 0; r < group.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        body(group.member(r));
      } catch (const Error& error) {
        errors[static_cast<size_t>(r)] = error.what();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return errors;
}

// Rank r's values: (r + 1) * (i + 0.25) for element i.
std::vector<float> values_of_rank(int rank, size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<float>(rank + 1) * (static_cast<float>(i) + 0.25f);
  return values;
}

TEST(InProcessCollectives, AllReduceSumsAndAveragesEveryRanksBuffer) {
  constexpr int kRanks = 4;
  constexpr size_t kCount = 1000;
  InProcessGroup group(kRanks);
  std::vector<std::vector<float>> sums(kRanks), means(kRanks);
  const auto errors = on_every_rank(group, [&](Collectives& c) {
    std::vector<float> sum = values_of_rank(c.rank(), kCount), mean = sum;
    c.all_reduce(sum, ReduceOp::kSum);
    c.all_reduce(mean, ReduceOp::kMean);
    sums[static_cast<size_t>(c.rank())] = sum;
    means[static_cast<size_t>(c.rank())] = mean;
  });
  for (const std::string& error : errors) EXPECT_EQ(error, "");
  for (size_t i = 0; i < kCount; ++i) {
    float expected = 0;
    for (int r = 0; r < kRanks; ++r) expected += values_of_rank(r, kCount)[i];
    EXPECT_EQ(sums[0][i], expected) << i;
    EXPECT_FLOAT_EQ(means[0][i], expected / kRanks) << i;
  }
  for (int r = 1; r < kRanks; ++r) {
    EXPECT_EQ(sums[static_cast<size_t>(r)], sums[0]) << "every rank gets the same bits";
    EXPECT_EQ(means[static_cast<size_t>(r)], means[0]);
  }
}

TEST(InProcessCollectives, BroadcastAllGatherAndBarrier) {
  constexpr int kRanks = 3;
  InProcessGroup group(kRanks);
  std::vector<std::vector<float>> broadcast(kRanks), gathered(kRanks);
  const auto errors = on_every_rank(group, [&](Collectives& c) {
    std::vector<float> mine = values_of_rank(c.rank(), 5);
    std::vector<float> everyone(5 * kRanks);
    c.all_gather(mine, everyone);
    c.barrier();
    c.broadcast(std::as_writable_bytes(std::span(mine)), 2);
    broadcast[static_cast<size_t>(c.rank())] = mine;
    gathered[static_cast<size_t>(c.rank())] = everyone;
  });
  for (const std::string& error : errors) EXPECT_EQ(error, "");
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(broadcast[static_cast<size_t>(r)], values_of_rank(2, 5)) << "rank " << r;
    for (int from = 0; from < kRanks; ++from) {
      const std::vector<float> part(gathered[static_cast<size_t>(r)].begin() + from * 5,
                                    gathered[static_cast<size_t>(r)].begin() + from * 5 + 5);
      EXPECT_EQ(part, values_of_rank(from, 5)) << "rank " << r << " from " << from;
    }
  }
}

TEST(InProcessCollectives, AMissingRankFailsTheOthersWithinTheTimeoutNamingIt) {
  InProcessGroup group(3, {.timeout = 300ms});
  const auto start = std::chrono::steady_clock::now();
  const auto errors = on_every_rank(group, [&](Collectives& c) {
    c.set_context("step 7");
    std::vector<float> gradients(10, 1.0f);
    if (c.rank() != 1) c.all_reduce(gradients, ReduceOp::kSum);  // rank 1 never comes
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0) << "the ranks that came must not hang";
  EXPECT_EQ(errors[1], "");
  // The first to time out names the collective, itself, the missing rank and the setting; the
  // other is released by the abort with the same reason.
  const std::string all = errors[0] + "\n" + errors[2];
  EXPECT_NE(all.find("all_reduce timed out after 300ms (runtime.strategy.collective_timeout)"), std::string::npos)
      << all;
  EXPECT_NE(all.find("at step 7: rank 1 did not arrive"), std::string::npos) << all;
  EXPECT_NE(errors[0], "");
  EXPECT_NE(errors[2], "");
  EXPECT_TRUE(group.aborted());
}

TEST(InProcessCollectives, MismatchedCollectivesAreAnErrorNamingBoth) {
  InProcessGroup group(2, {.timeout = 2s});
  const auto errors = on_every_rank(group, [&](Collectives& c) {
    std::vector<float> buffer(c.rank() == 0 ? 4 : 6, 1.0f);
    if (c.rank() == 0) std::this_thread::sleep_for(50ms);  // rank 1 arrives first
    c.all_reduce(buffer, ReduceOp::kSum);
  });
  EXPECT_NE(errors[0].find("rank 0 called all_reduce of 4 elements while rank 1 called all_reduce of 6 elements"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("aborted"), std::string::npos) << errors[1];
}

TEST(InProcessCollectives, BadArgumentsAreClearErrors) {
  EXPECT_NE(error_message([] { InProcessGroup group(0); }).find("at least one rank"), std::string::npos);
  EXPECT_NE(error_message([] { InProcessGroup group(2, {.timeout = 0ms}); }).find("must be positive"),
            std::string::npos);
  EXPECT_EQ(distribute::format_timeout(std::chrono::minutes(10)), "10min");
  EXPECT_EQ(distribute::format_timeout(2s), "2s");
}

}  // namespace
}  // namespace nimbus::testing
