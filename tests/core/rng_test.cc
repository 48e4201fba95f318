// Philox4x32-10 and the generators built on it: known answers from the
// reference implementation, statistics of the derived uniforms and normals,
// Generator offset bookkeeping, and reproducibility of the random ops.
#include "nimbus/base/rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <thread>
#include <vector>

#include "nimbus/device/runtime.h"
#include "nimbus/ops/creation.h"

namespace nimbus {
namespace {

// Random123's philox4x32 takes a counter of four words (c0, c1, c2, c3) and a
// key of two (k0, k1). Nimbus's philox4x32(key, counter_hi, counter_lo) packs
// them as
//   k0 = low 32 bits of key,        k1 = high 32 bits of key,
//   c0 = low 32 bits of counter_lo, c1 = high 32 bits of counter_lo,
//   c2 = low 32 bits of counter_hi, c3 = high 32 bits of counter_hi,
// and returns the four output words in Random123's order.
std::array<uint32_t, 4> random123_philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  const uint64_t packed_key = (static_cast<uint64_t>(key[1]) << 32) | key[0];
  const uint64_t counter_lo = (static_cast<uint64_t>(counter[1]) << 32) | counter[0];
  const uint64_t counter_hi = (static_cast<uint64_t>(counter[3]) << 32) | counter[2];
  return philox4x32(packed_key, counter_hi, counter_lo);
}

// The "philox4x32 10" lines of Random123's known-answer file tests/kat_vectors
// (github.com/DEShawResearch/random123; columns: counter[4], key[2], expected[4]).
TEST(Philox, Random123KnownAnswers) {
  struct Kat {
    std::array<uint32_t, 4> counter;
    std::array<uint32_t, 2> key;
    std::array<uint32_t, 4> expected;
  };
  const Kat kats[] = {
      {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
       {0x00000000, 0x00000000},
       {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      // The digits of pi.
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& kat : kats) {
    EXPECT_EQ(random123_philox4x32_10(kat.counter, kat.key), kat.expected) << std::hex << kat.counter[0];
  }
}

TEST(Philox, EveryInputWordMatters) {
  const auto base = philox4x32(0x0123456789abcdefull, 0x1111111122222222ull, 0x3333333344444444ull);
  for (int bit = 0; bit < 64; bit += 7) {
    const uint64_t flip = 1ull << bit;
    EXPECT_NE(philox4x32(0x0123456789abcdefull ^ flip, 0x1111111122222222ull, 0x3333333344444444ull), base);
    EXPECT_NE(philox4x32(0x0123456789abcdefull, 0x1111111122222222ull ^ flip, 0x3333333344444444ull), base);
    EXPECT_NE(philox4x32(0x0123456789abcdefull, 0x1111111122222222ull, 0x3333333344444444ull ^ flip), base);
  }
}

// Sample mean and (population) variance.
std::pair<double, double> moments(const std::vector<double>& v) {
  double total = 0;
  for (double x : v) total += x;
  const double mean = total / static_cast<double>(v.size());
  double squares = 0;
  for (double x : v) squares += (x - mean) * (x - mean);
  return {mean, squares / static_cast<double>(v.size())};
}

// The correlation of consecutive draws.
double lag1_correlation(const std::vector<double>& v) {
  const auto [mean, var] = moments(v);
  double total = 0;
  for (size_t i = 0; i + 1 < v.size(); ++i) total += (v[i] - mean) * (v[i + 1] - mean);
  return total / static_cast<double>(v.size() - 1) / var;
}

constexpr int kDraws = 1'000'000;
// Bounds are 5 standard errors of each statistic for kDraws samples: a correct
// generator fails one about once in 1.7 million runs, and the draws are fixed.

TEST(Philox, UniformFloatStatistics) {
  std::vector<double> draws;
  for (uint64_t i = 0; i < kDraws; ++i) {
    const float u = philox_uniform(42, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    // 24 random bits: every value is a multiple of 2^-24.
    ASSERT_EQ(std::ldexp(static_cast<double>(u), 24), std::floor(std::ldexp(static_cast<double>(u), 24)));
    draws.push_back(u);
  }
  const auto [mean, var] = moments(draws);
  EXPECT_NEAR(mean, 0.5, 5 * std::sqrt(1.0 / 12 / kDraws));
  // Var of the sample variance of U(0,1) is (1/80 - 1/144) / n.
  EXPECT_NEAR(var, 1.0 / 12, 5 * std::sqrt((1.0 / 80 - 1.0 / 144) / kDraws));
  EXPECT_NEAR(lag1_correlation(draws), 0.0, 5 / std::sqrt(static_cast<double>(kDraws)));
  // Each tenth of [0, 1) gets its share.
  std::array<int, 10> bins{};
  for (double u : draws) ++bins[static_cast<size_t>(u * 10)];
  for (int count : bins) EXPECT_NEAR(count, kDraws / 10, 5 * std::sqrt(kDraws * 0.1 * 0.9));
}

TEST(Philox, UniformDoubleStatistics) {
  std::vector<double> draws;
  for (uint64_t i = 0; i < kDraws; ++i) {
    const double u = philox_uniform_double(7, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    draws.push_back(u);
  }
  const auto [mean, var] = moments(draws);
  EXPECT_NEAR(mean, 0.5, 5 * std::sqrt(1.0 / 12 / kDraws));
  EXPECT_NEAR(var, 1.0 / 12, 5 * std::sqrt((1.0 / 80 - 1.0 / 144) / kDraws));
  EXPECT_NEAR(lag1_correlation(draws), 0.0, 5 / std::sqrt(static_cast<double>(kDraws)));
  // 53 bits: the draws are not all on the f32 grid of philox_uniform.
  const size_t off_grid = static_cast<size_t>(std::count_if(
      draws.begin(), draws.end(), [](double u) { return std::ldexp(u, 24) != std::floor(std::ldexp(u, 24)); }));
  EXPECT_GT(off_grid, draws.size() * 99 / 100);
}

TEST(Philox, NormalStatistics) {
  std::vector<double> draws;
  for (uint64_t i = 0; i < kDraws; ++i) {
    const double z = philox_normal(3, i);
    ASSERT_TRUE(std::isfinite(z)) << i;
    draws.push_back(z);
  }
  const auto [mean, var] = moments(draws);
  EXPECT_NEAR(mean, 0.0, 5 / std::sqrt(static_cast<double>(kDraws)));
  // Var of the sample variance of N(0,1) is 2 / n.
  EXPECT_NEAR(var, 1.0, 5 * std::sqrt(2.0 / kDraws));
  EXPECT_NEAR(lag1_correlation(draws), 0.0, 5 / std::sqrt(static_cast<double>(kDraws)));
  // Tails: P(z < -1.96) = P(z > 1.96) = 0.025.
  const double below =
      static_cast<double>(std::count_if(draws.begin(), draws.end(), [](double z) { return z < -1.96; }));
  const double above =
      static_cast<double>(std::count_if(draws.begin(), draws.end(), [](double z) { return z > 1.96; }));
  const double tail_bound = 5 * std::sqrt(kDraws * 0.025 * 0.975);
  EXPECT_NEAR(below, kDraws * 0.025, tail_bound);
  EXPECT_NEAR(above, kDraws * 0.025, tail_bound);
}

TEST(Philox, StreamsDependOnSeedAndIndexOnly) {
  EXPECT_EQ(philox_uniform(5, 123), philox_uniform(5, 123));
  EXPECT_EQ(philox_normal(5, 123), philox_normal(5, 123));
  int same_across_seeds = 0, same_across_index = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    same_across_seeds += philox_uniform(5, i) == philox_uniform(6, i);
    same_across_index += philox_uniform(5, i) == philox_uniform(5, i + 1000);
  }
  // Two independent 24-bit draws agree with probability 2^-24.
  EXPECT_LE(same_across_seeds, 1);
  EXPECT_LE(same_across_index, 1);
}

TEST(Generator, ReserveHandsOutConsecutiveRanges) {
  Generator gen(99);
  EXPECT_EQ(gen.seed(), 99u);
  EXPECT_EQ(gen.offset(), 0u);
  EXPECT_EQ(gen.reserve(10), 0u);
  EXPECT_EQ(gen.reserve(5), 10u);
  EXPECT_EQ(gen.reserve(0), 15u);
  EXPECT_EQ(gen.offset(), 15u);

  Generator copy(gen);
  EXPECT_EQ(copy.seed(), 99u);
  EXPECT_EQ(copy.offset(), 15u);
  copy.reserve(100);
  EXPECT_EQ(gen.offset(), 15u) << "a copy has its own offset";

  gen.set_state(7, 1000);
  EXPECT_EQ(gen.seed(), 7u);
  EXPECT_EQ(gen.reserve(1), 1000u);
}

TEST(Generator, ConcurrentReservationsNeverOverlap) {
  Generator gen(1);
  constexpr int kThreads = 4, kCalls = 5000;
  std::vector<std::vector<uint64_t>> starts(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) starts[t].push_back(gen.reserve(3));
    });
  }
  for (auto& thread : threads) thread.join();
  std::set<uint64_t> all;
  for (const auto& s : starts) all.insert(s.begin(), s.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kCalls));
  for (uint64_t start : all) EXPECT_EQ(start % 3, 0u);
  EXPECT_EQ(gen.offset(), 3u * kThreads * kCalls);
}

// Restores the process-wide generator and thread count that a test changes.
class RandomOps : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_seed_ = default_generator().seed();
    saved_offset_ = default_generator().offset();
    saved_options_ = runtime_options();
  }
  void TearDown() override {
    configure_runtime(saved_options_);
    default_generator().set_state(saved_seed_, saved_offset_);
  }

 private:
  uint64_t saved_seed_ = 0, saved_offset_ = 0;
  RuntimeOptions saved_options_;
};

TEST_F(RandomOps, ManualSeedRestartsTheDefaultStream) {
  manual_seed(1234);
  EXPECT_EQ(default_generator().seed(), 1234u);
  EXPECT_EQ(default_generator().offset(), 0u);
  const std::vector<float> first = random_uniform({100}).to_vector<float>();
  EXPECT_EQ(default_generator().offset(), 100u) << "a random op reserves one number per element";
  const std::vector<float> second = random_uniform({100}).to_vector<float>();
  EXPECT_NE(first, second);
  manual_seed(1234);
  EXPECT_EQ(random_uniform({100}).to_vector<float>(), first);
}

TEST_F(RandomOps, UniformDrawsElementIFromOffsetPlusI) {
  Generator gen(77);
  gen.reserve(5);
  const std::vector<float> values = random_uniform({8}, 0, 1, DType::kF32, Device::cpu(), &gen).to_vector<float>();
  for (uint64_t i = 0; i < 8; ++i) EXPECT_EQ(values[i], philox_uniform(77, 5 + i)) << i;
  EXPECT_EQ(gen.offset(), 13u);
}

TEST_F(RandomOps, SameSeedSameTensorsOnAnyThreadCount) {
  auto draw = [](int threads) {
    RuntimeOptions options;
    options.threads = threads;
    configure_runtime(options);
    Generator gen(2024);
    std::vector<std::vector<double>> result;
    for (DType dtype : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16}) {
      result.push_back(random_normal({257, 33}, 0.5, 2.0, dtype, Device::cpu(), &gen).to_vector<double>());
      result.push_back(random_uniform({1000, 7}, -3, 5, dtype, Device::cpu(), &gen).to_vector<double>());
    }
    return result;
  };
  const auto one = draw(1);
  EXPECT_EQ(draw(2), one);
  EXPECT_EQ(draw(hardware_cores()), one);
  EXPECT_EQ(draw(8), one);
}

TEST_F(RandomOps, TensorStatisticsFollowTheParameters) {
  Generator gen(5);
  const std::vector<double> normal =
      random_normal({kDraws}, 3.0, 2.0, DType::kF64, Device::cpu(), &gen).to_vector<double>();
  const auto [mean, var] = moments(normal);
  EXPECT_NEAR(mean, 3.0, 5 * 2.0 / std::sqrt(static_cast<double>(kDraws)));
  EXPECT_NEAR(var, 4.0, 5 * 4.0 * std::sqrt(2.0 / kDraws));

  const std::vector<double> uniform =
      random_uniform({kDraws}, -2.0, 6.0, DType::kF32, Device::cpu(), &gen).to_vector<double>();
  const auto [u_mean, u_var] = moments(uniform);
  EXPECT_NEAR(u_mean, 2.0, 5 * 8.0 * std::sqrt(1.0 / 12 / kDraws));
  EXPECT_NEAR(u_var, 64.0 / 12, 5 * 64.0 * std::sqrt((1.0 / 80 - 1.0 / 144) / kDraws));
  EXPECT_GE(*std::min_element(uniform.begin(), uniform.end()), -2.0);
  EXPECT_LT(*std::max_element(uniform.begin(), uniform.end()), 6.0);
}

TEST_F(RandomOps, UniformStaysBelowHighInEveryDtype) {
  Generator gen(11);
  for (DType dtype : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16}) {
    const std::vector<double> values =
        random_uniform({1 << 16}, 0.0, 1.0, dtype, Device::cpu(), &gen).to_vector<double>();
    EXPECT_GE(*std::min_element(values.begin(), values.end()), 0.0) << dtype_name(dtype);
    EXPECT_LT(*std::max_element(values.begin(), values.end()), 1.0) << dtype_name(dtype);
    EXPECT_GT(*std::max_element(values.begin(), values.end()), 0.99) << dtype_name(dtype) << ": the top is reached";
    const std::vector<double> shifted =
        random_uniform({1 << 16}, -3.0, 5.0, dtype, Device::cpu(), &gen).to_vector<double>();
    EXPECT_GE(*std::min_element(shifted.begin(), shifted.end()), -3.0) << dtype_name(dtype);
    EXPECT_LT(*std::max_element(shifted.begin(), shifted.end()), 5.0) << dtype_name(dtype);
  }
}

TEST_F(RandomOps, UniformLargestDrawDoesNotRoundUpToHigh) {
  // Draw 25275781 of stream 1 is the largest f32 uniform, 1 - 2^-24; in
  // [1, 2), 1 + (1 - 2^-24) is halfway between 2 - 2^-23 and 2 and rounds to 2.
  constexpr uint64_t kIndex = 25275781;
  ASSERT_EQ(philox_uniform(1, kIndex), 1.0f - 0x1p-24f);
  Generator gen(1);
  gen.set_state(1, kIndex);
  const float value = random_uniform({1}, 1.0, 2.0, DType::kF32, Device::cpu(), &gen).item<float>();
  EXPECT_LT(value, 2.0f);
  EXPECT_EQ(value, 2.0f - 0x1p-23f) << "the largest f32 below 2";
}

TEST_F(RandomOps, NonFloatingDtypeIsRefused) {
  EXPECT_THROW(random_uniform({3}, 0, 1, DType::kI32), InvalidArgument);
  EXPECT_THROW(random_normal({3}, 0, 1, DType::kBool), InvalidArgument);
}

}  // namespace
}  // namespace nimbus
