// The vectorized CPU casts (F16C for f16, the rounding bit trick for bf16)
// against the plain scalar conversions of base/half.h, which half_test.cc
// checks against the CPU's own F16C instructions and an independent rounding
// rule: every f16 and bf16 bit pattern widened, and f32 values at every
// rounding decision (ties, subnormals, overflow to inf, NaN) narrowed. The
// tensors are long enough for the vector loops and their scalar tails alike.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "nimbus/base/half.h"
#include "nimbus/ops/elementwise.h"

namespace nimbus {
namespace {

template <typename T>
Tensor every_bit_pattern() {
  std::vector<T> values(65536);
  for (uint32_t b = 0; b < 65536; ++b) values[b] = T::from_bits(static_cast<uint16_t>(b));
  return Tensor::from_vector<T>(values, {65536});
}

// f32 values at each rounding decision of f32 -> f16 and f32 -> bf16, with both signs.
std::vector<float> rounding_probes() {
  std::vector<uint32_t> bits;
  for (uint32_t exponent = 0; exponent < 256; ++exponent) {
    for (uint32_t kept = 0; kept < 1024; kept += 7) {
      // Dropped bits of f16 (13) and bf16 (16): zero, below, at and above halfway, maximum.
      for (uint32_t dropped : {0x0000u, 0x0fffu, 0x1000u, 0x1001u, 0x1fffu, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
        bits.push_back((exponent << 23) | ((kept << 13) & 0x7fffffu) | dropped);
      }
    }
  }
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 200000; ++i) bits.push_back(any(rng));
  std::vector<float> values;
  for (uint32_t b : bits) {
    values.push_back(std::bit_cast<float>(b & 0x7fffffffu));
    values.push_back(std::bit_cast<float>(b | 0x80000000u));
  }
  for (float v :
       {65504.0f, 65519.996f, 65520.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-24f, 0x1p-14f, std::numeric_limits<float>::max(),
        std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    values.push_back(v);
  }
  // An odd length: the last few go through the scalar tail.
  values.push_back(1.0f + 0x1p-11f);
  return values;
}

template <typename T>
void expect_widening_matches_scalar() {
  const Tensor widened = cast(every_bit_pattern<T>(), DType::kF32);
  const std::vector<float> fast = widened.to_vector<float>();
  for (uint32_t b = 0; b < 65536; ++b) {
    const float expected = T::to_float(static_cast<uint16_t>(b));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(fast[b])) << std::hex << b;
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(fast[b]), std::bit_cast<uint32_t>(expected)) << "bits 0x" << std::hex << b;
  }
}

template <typename T>
void expect_narrowing_matches_scalar() {
  const std::vector<float> values = rounding_probes();
  const Tensor narrowed =
      cast(Tensor::from_vector<float>(values, {static_cast<int64_t>(values.size())}), dtype_of<T>());
  const auto* fast = static_cast<const uint16_t*>(narrowed.raw_data());
  int subnormal = 0, infinite = 0, nan = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t expected = T::from_float(values[i]);
    if (std::isnan(values[i])) {
      ASSERT_TRUE(std::isnan(T::to_float(fast[i]))) << i;
      ++nan;
      continue;
    }
    ASSERT_EQ(fast[i], expected) << "f32 " << std::hexfloat << values[i];
    const float result = T::to_float(expected);
    const float smallest_normal = std::is_same_v<T, Half> ? 0x1p-14f : 0x1p-126f;
    subnormal += result != 0 && std::abs(result) < smallest_normal;
    infinite += std::isinf(result);
  }
  EXPECT_GT(nan, 0);
  EXPECT_GT(infinite, 0);
  EXPECT_GT(subnormal, 0);
}

TEST(CastKernels, EveryHalfWidensLikeTheScalarConversion) { expect_widening_matches_scalar<Half>(); }
TEST(CastKernels, EveryBFloat16WidensLikeTheScalarConversion) { expect_widening_matches_scalar<BFloat16>(); }
TEST(CastKernels, FloatsRoundToHalfLikeTheScalarConversion) { expect_narrowing_matches_scalar<Half>(); }
TEST(CastKernels, FloatsRoundToBFloat16LikeTheScalarConversion) { expect_narrowing_matches_scalar<BFloat16>(); }

TEST(CastKernels, HalfSubnormalsAndOverflowRoundAsIeeeSays) {
  // Spelled out: the smallest f16 subnormal, its half (a tie, to even: zero), 1.5 of it (tie: 2),
  // the largest finite f16, and 65520 (the tie to 65536, which is inf in f16).
  const Tensor x =
      Tensor::from_vector<float>({0x1p-24f, 0x1p-25f, 0x1.8p-24f, 65504.0f, 65520.0f, -0.0f, 1e-8f, 3e-5f}, {8});
  const Tensor h = cast(x, DType::kF16);
  const auto* bits = static_cast<const uint16_t*>(h.raw_data());
  EXPECT_EQ(bits[0], 0x0001u);
  EXPECT_EQ(bits[1], 0x0000u);
  EXPECT_EQ(bits[2], 0x0002u);
  EXPECT_EQ(bits[3], 0x7bffu);
  EXPECT_EQ(bits[4], 0x7c00u);
  EXPECT_EQ(bits[5], 0x8000u);
  EXPECT_EQ(bits[6], 0x0000u);  // 1e-8 is below half the smallest subnormal: underflows to zero
  EXPECT_NEAR(Half::to_float(bits[7]), 3e-5f, 0x1p-24f);  // a subnormal, kept to within one of its steps
}

}  // namespace
}  // namespace nimbus
