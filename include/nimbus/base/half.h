// 16-bit floating-point storage types.
//
//   Half h(1.5f);          // IEEE 754 binary16
//   BFloat16 b(3.14159f);  // bfloat16: the top 16 bits of an f32, rounded to nearest even
//   float f = float(h) + float(b);
//
// Arithmetic happens in f32: these types only store. Conversions round to
// nearest even and keep NaN a NaN and infinities infinite.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace nimbus {

// IEEE 754 binary16: 1 sign bit, 5 exponent bits, 10 mantissa bits.
struct Half {
  uint16_t bits = 0;

  Half() = default;
  explicit Half(float value) : bits(from_float(value)) {}
  explicit operator float() const { return to_float(bits); }

  static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }

  static uint16_t from_float(float value);
  static float to_float(uint16_t bits);
};

// bfloat16: the upper half of an f32 (same exponent range, 7 mantissa bits).
struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  explicit BFloat16(float value) : bits(from_float(value)) {}
  explicit operator float() const { return to_float(bits); }

  static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }

  static uint16_t from_float(float value) {
    uint32_t u = std::bit_cast<uint32_t>(value);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
    // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit.
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
  static float to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }
};

inline uint16_t Half::from_float(float value) {
  // Bit-exact round-to-nearest-even conversion (the F16C instruction's result).
  const uint32_t u = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow rounds to inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): scale into the 10-bit mantissa with rounding.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14 + (113 - exponent) - 1
    uint32_t half_mantissa = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (half_mantissa & 1u))) ++half_mantissa;
    return static_cast<uint16_t>(sign | half_mantissa);
  }
  // Normal: rebias the exponent (127 -> 15) and round the mantissa to 10 bits.
  uint32_t rounded = abs - 0x38000000u;  // (127 - 15) << 23
  rounded += 0xfffu + ((rounded >> 13) & 1u);
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

inline float Half::to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf or NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal half: normalize into an f32.
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ffu;
    bits = sign | (static_cast<uint32_t>(113 - shift) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

}  // namespace nimbus
