// 16-bit floats. Half is checked bit for bit against the CPU's own F16C
// conversions (VCVTPH2PS / VCVTPS2PH, which implement IEEE 754 binary16 with
// round-to-nearest-even); the build targets x86-64-v3, which includes F16C.
// BFloat16 is checked against a rounding rule written independently of its
// bit trick: pick the nearer of the two bf16 neighbours, the even one on a tie.
#include "nimbus/base/half.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace nimbus {
namespace {

uint16_t f16c_from_float(float value) { return static_cast<uint16_t>(_cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT)); }
float f16c_to_float(uint16_t bits) { return _cvtsh_ss(bits); }

uint32_t bits_of(float value) { return std::bit_cast<uint32_t>(value); }
float float_of(uint32_t bits) { return std::bit_cast<float>(bits); }

// f32 bit patterns that probe every rounding decision of f32 -> f16.
std::vector<uint32_t> probe_floats() {
  std::vector<uint32_t> result;
  // Every exponent (zero, subnormal, normal, inf/NaN) and every value of the 10
  // mantissa bits a normal half keeps, with the 13 dropped bits at zero, just
  // below, at and just above the halfway point, and at their maximum.
  const uint32_t dropped_patterns[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff};
  for (uint32_t exponent = 0; exponent < 256; ++exponent) {
    for (uint32_t kept = 0; kept < 1024; ++kept) {
      for (uint32_t dropped : dropped_patterns) result.push_back((exponent << 23) | (kept << 13) | dropped);
    }
  }
  // Results that are subnormal halves round at another bit: f32 exponent e
  // keeps 24 - (126 - e) bits of the 24-bit significand. Probe the same
  // neighbourhood of halfway at each of those positions.
  for (uint32_t exponent = 101; exponent <= 112; ++exponent) {
    const uint32_t shift = 126 - exponent;
    const uint32_t half = 1u << (shift - 1);
    const uint32_t low_patterns[] = {0, 1, half - 1, half, half + 1, (1u << shift) - 1};
    const uint32_t kept_begin = (1u << 23) >> shift, kept_end = (1u << 24) >> shift;
    for (uint32_t kept = std::max(kept_begin, 1u) - 1; kept < kept_end; ++kept) {
      for (uint32_t low : low_patterns) {
        const uint32_t significand = (kept << shift) | low;
        if (significand < (1u << 23) || significand >= (1u << 24)) continue;
        result.push_back((exponent << 23) | (significand & 0x7fffffu));
      }
    }
  }
  // Random bit patterns: everywhere, and concentrated on the range a half can hold.
  std::mt19937 rng(2024);
  std::uniform_int_distribution<uint32_t> any_bits;
  std::uniform_int_distribution<uint32_t> half_range(0x33000000u - 0x100000u, 0x47800000u + 0x100000u);
  for (int i = 0; i < 1000000; ++i) result.push_back(any_bits(rng) & 0x7fffffffu);
  for (int i = 0; i < 1000000; ++i) result.push_back(half_range(rng));
  // Named specials: largest half (65504), the overflow threshold 65520, just below it, f32 extremes.
  for (float v : {65504.0f, 65519.996f, 65520.0f, 65536.0f, std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(), 0x1p-24f, 0x1p-25f,
                  0x1.000002p-25f, 0x1.8p-24f, 0x1p-14f, std::numeric_limits<float>::infinity()}) {
    result.push_back(bits_of(v));
  }
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fa00000u, 0x7fbfffffu, 0x7fffffffu, 0x7f802000u}) {
    result.push_back(nan);
  }
  // Both signs of everything.
  const size_t n = result.size();
  for (size_t i = 0; i < n; ++i) result.push_back(result[i] | 0x80000000u);
  return result;
}

TEST(Half, EveryHalfConvertsToTheSameFloatAsF16C) {
  int checked_nan = 0;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float ours = Half::to_float(bits);
    const float cpu = f16c_to_float(bits);
    if (std::isnan(cpu)) {
      // A NaN stays a NaN with its sign and payload; F16C also sets the quiet
      // bit of a signalling NaN (as any IEEE arithmetic would).
      ASSERT_TRUE(std::isnan(ours)) << std::hex << h;
      ASSERT_EQ(bits_of(ours) | 0x00400000u, bits_of(cpu)) << std::hex << h;
      ++checked_nan;
      continue;
    }
    ASSERT_EQ(bits_of(ours), bits_of(cpu)) << "half 0x" << std::hex << h << ": " << ours << " vs F16C " << cpu;
  }
  EXPECT_EQ(checked_nan, 2 * 1023);
}

TEST(Half, FloatsRoundToTheSameHalfAsF16C) {
  const std::vector<uint32_t> probes = probe_floats();
  ASSERT_GT(probes.size(), 5'000'000u);
  for (uint32_t bits : probes) {
    const float value = float_of(bits);
    ASSERT_EQ(Half::from_float(value), f16c_from_float(value))
        << "float 0x" << std::hex << bits << " (" << std::hexfloat << value << ")";
  }
}

TEST(Half, NamedRoundingCases) {
  // Checked against F16C above; these spell out what the rules mean.
  EXPECT_EQ(Half::from_float(65504.0f), 0x7bffu);           // the largest half
  EXPECT_EQ(Half::from_float(65520.0f), 0x7c00u);           // halfway to 65536 rounds to even: infinity
  EXPECT_EQ(Half::from_float(0x1p-24f), 0x0001u);           // the smallest subnormal
  EXPECT_EQ(Half::from_float(0x1p-25f), 0x0000u);           // half of it ties to even: zero
  EXPECT_EQ(Half::from_float(0x1.8p-24f), 0x0002u);         // 1.5 ulp ties to even: 2 ulp
  EXPECT_EQ(Half::from_float(-0.0f), 0x8000u);              // the sign of zero survives
  EXPECT_EQ(Half::from_float(1.0f + 0x1p-11f), 0x3c00u);    // tie between 1 and 1 + 2^-10: even (1)
  EXPECT_EQ(Half::from_float(1.0f + 0x1.8p-10f), 0x3c02u);  // tie between 1 + 2^-10 and 1 + 2^-9: even
  EXPECT_TRUE(std::isnan(float(Half(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(Half::from_float(-std::numeric_limits<float>::infinity()), 0xfc00u);
}

TEST(Half, EveryNonNanHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    if ((bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0) continue;  // NaN
    ASSERT_EQ(Half::from_float(Half::to_float(bits)), bits) << std::hex << h;
  }
}

// ---- bfloat16 ----

// The magnitude of the bf16 with bits `upper` (sign cleared); the pattern just
// past the largest finite value stands for 2^128, the next step of the scale,
// so that rounding up into infinity is decided like any other step.
double bf16_magnitude(uint32_t upper) {
  if (upper >= 0x7f80u) return std::ldexp(1.0, 128);
  return static_cast<double>(float_of(upper << 16));
}

// Round-to-nearest-even of an f32 to bf16 by comparing distances in exact
// (double) arithmetic rather than by adding a rounding bias to the bits.
uint16_t bf16_reference(float value) {
  const uint32_t bits = bits_of(value);
  const uint32_t sign = bits & 0x80000000u;
  const uint32_t magnitude_bits = bits & 0x7fffffffu;
  if (magnitude_bits >= 0x7f800000u) return static_cast<uint16_t>(bits >> 16);  // inf (NaN is checked apart)
  const double x = std::abs(static_cast<double>(value));
  const uint32_t below = magnitude_bits >> 16;
  const double distance_below = x - bf16_magnitude(below);
  const double distance_above = bf16_magnitude(below + 1) - x;
  uint32_t chosen = below;
  if (distance_above < distance_below || (distance_above == distance_below && (below & 1u) != 0)) chosen = below + 1;
  return static_cast<uint16_t>((sign >> 16) | chosen);
}

TEST(BFloat16, RoundsToNearestEvenLikeTheReferenceRule) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> low_bits(0, 0xffff);
  int checked = 0;
  for (uint32_t upper = 0; upper <= 0xffff; ++upper) {
    // The 16 dropped bits: zero, just below / at / just above halfway, the maximum, and two random ones.
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, low_bits(rng), low_bits(rng)}) {
      const uint32_t bits = (upper << 16) | low;
      const float value = float_of(bits);
      const uint16_t ours = BFloat16::from_float(value);
      if (std::isnan(value)) {
        // NaN stays NaN (with its sign), even when the kept mantissa bits are all zero.
        ASSERT_TRUE(std::isnan(BFloat16::to_float(ours))) << std::hex << bits;
        ASSERT_EQ(ours & 0x8000u, (bits >> 16) & 0x8000u) << std::hex << bits;
        continue;
      }
      ASSERT_EQ(ours, bf16_reference(value)) << "float 0x" << std::hex << bits;
      ++checked;
    }
  }
  EXPECT_GT(checked, 500'000);
}

TEST(BFloat16, ToFloatIsExactAndRoundTrips) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const float value = BFloat16::to_float(bits);
    ASSERT_EQ(bits_of(value), b << 16);
    if (!std::isnan(value)) {
      ASSERT_EQ(BFloat16::from_float(value), bits) << std::hex << b;
    }
  }
  EXPECT_EQ(BFloat16::from_float(std::numeric_limits<float>::max()), 0x7f80u);  // rounds up into infinity
  EXPECT_EQ(BFloat16::from_float(1.0f + 0x1p-8f), 0x3f80u);                     // tie: even (1)
  EXPECT_EQ(BFloat16::from_float(1.0f + 0x1.8p-7f), 0x3f82u);                   // tie: even (1 + 2^-6)
}

}  // namespace
}  // namespace nimbus
