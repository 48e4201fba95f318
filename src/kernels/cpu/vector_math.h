// Branch-free f32 math on vectors of any width (V = simd::Vec<float, Bytes>)
// for the vectorized CPU kernels:
// exp, log, log1p, tanh, sigmoid, softplus, erf and GELU (both forms) with
// its derivative. glibc's scalar libm calls do not vectorize without
// -ffast-math, which we refuse because it breaks NaN and Inf; so each
// function reduces its argument (Cephes style) and evaluates a polynomial.
//
// Every function keeps IEEE special values: NaN in gives NaN out; +-Inf and
// overflow give the limits the reference kernels give. Maximum errors against
// the exact result, measured over every 8th f32 bit pattern (subnormals
// included; tests/core/vector_math_test.cc checks the bounds in brackets on a
// sparser sweep):
//
//   exp        1.07 ulp  [1.5]      tanh      1.34 ulp  [2]
//   log        0.82 ulp  [1.5]      sigmoid   2.78 ulp  [3]
//   log1p      2.45 ulp  [3]        softplus  2.73 ulp  [3]
//   erf        2.39 ulp  [3]
//   gelu, gelu' (both forms): |error| <= 2.2e-7 max(1, |x|)  [3e-7]
//
// Internal.
#pragma once

#include "src/kernels/cpu/simd.h"

namespace nimbus::cpu::vmath {

using simd::splat;

// x = n ln2 + r with |r| <= ln2/2 (ln2 split in two for an exact product):
// returns r, and n as integer lanes.
template <typename V>
NIMBUS_ALWAYS_INLINE V reduce_by_ln2(V x, simd::MaskOf<V>& n) {
  using I = simd::MaskOf<V>;
  // Adding 1.5 * 2^23 rounds to an integer, which then sits in the low mantissa bits.
  constexpr float kRound = 12582912.0f;
  const V shifted = x * 1.44269504088896341f + kRound;
  const V rounded = shifted - kRound;
  n = simd::bits<I>(shifted) - simd::bits<I>(splat<V>(kRound));
  const V r = x - rounded * 0.693359375f;
  return r - rounded * -2.12194440e-4f;
}

// e^x: e^r by a degree-6 polynomial fitted by scripts/fit_vector_math.py,
// times 2^n built from exponent bits in two halves so that results near the
// overflow and underflow limits round once.
template <typename V>
NIMBUS_ALWAYS_INLINE V exp(V x) {
  using I = simd::MaskOf<V>;
  // Past these limits the result is inf or 0 anyway; the clamps keep n in range and let NaN through.
  x = simd::clamp_below(x, -104.0f);
  x = simd::clamp_above(x, 89.0f);
  I ni;
  const V r = reduce_by_ln2(x, ni);
  V p = splat<V>(1.3941108434e-3f);
  p = p * r + 8.37512639815e-3f;
  p = p * r + 4.16663528968e-2f;
  p = p * r + 1.66664155147e-1f;
  p = p * r + 5.00000004712e-1f;
  p = p * r + 1.00000003772f;
  p = p * r + 1.0f;
  const I half = ni >> 1;
  const V scale_1 = simd::bits<V>((half + 127) << 23);
  const V scale_2 = simd::bits<V>((ni - half + 127) << 23);
  return p * scale_1 * scale_2;
}

// Natural logarithm: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log(m) by
// Cephes's polynomial in m - 1. Subnormal inputs are scaled by 2^23 first.
template <typename V>
NIMBUS_ALWAYS_INLINE V log(V x) {
  using I = simd::MaskOf<V>;
  const I subnormal = x < 1.17549435e-38f;
  const V scaled = subnormal ? x * 8388608.0f : x;
  const I bits = simd::bits<I>(scaled);
  // The mantissa with the exponent of 0.5: m in [0.5, 1).
  V m = simd::bits<V>((bits & 0x007fffff) | 0x3f000000);
  V e = __builtin_convertvector(((bits >> 23) & 0xff) - 126, V);
  e = subnormal ? e - 23.0f : e;
  const I below = m < 0.707106781186547524f;
  e = below ? e - 1.0f : e;
  m = below ? m + m - 1.0f : m - 1.0f;
  const V z = m * m;
  V y = splat<V>(7.0376836292e-2f);
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y = y + e * -2.12194440e-4f;
  y = y - 0.5f * z;
  V result = m + y + e * 0.693359375f;
  constexpr float kInf = __builtin_huge_valf();
  result = x == 0.0f ? splat<V>(-kInf) : result;
  result = x == kInf ? splat<V>(kInf) : result;
  // Negative inputs give NaN, and NaN stays (x != x only for NaN).
  result = x < 0.0f ? splat<V>(__builtin_nanf("")) : result;
  return x != x ? x : result;
}

// log(1 + x), accurate for tiny x: log(w) * x / (w - 1) with w = 1 + x
// cancels the rounding of w (Goldberg's trick).
template <typename V>
NIMBUS_ALWAYS_INLINE V log1p(V x) {
  const V w = x + 1.0f;
  const V d = w - 1.0f;
  const V corrected = log(w) * (x / d);
  // d == 0: x is below half an ulp of 1, where log1p(x) = x. w == inf: the quotient is inf / inf.
  const V result = d == 0.0f ? x : corrected;
  return w == __builtin_huge_valf() ? w : result;
}

// tanh: Cephes's odd polynomial for |x| < 0.625, else 1 - 2 / (e^2|x| + 1)
// with the sign of x (e^2|x| = inf gives exactly 1).
template <typename V>
NIMBUS_ALWAYS_INLINE V tanh(V x) {
  const V z = x * x;
  V p = splat<V>(-5.70498872745e-3f);
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const V small = p * z * x + x;
  const V ax = simd::abs(x);
  const V large = 1.0f - 2.0f / (exp(ax + ax) + 1.0f);
  // The sign is copied onto both branches: x + x z p(z) is +0 for x = -0.
  return simd::copysign(ax < 0.625f ? small : large, x);
}

// 1 / (1 + e^-x), from e^-|x| so that neither tail overflows or cancels.
template <typename V>
NIMBUS_ALWAYS_INLINE V sigmoid(V x) {
  const V e = exp(-simd::abs(x));
  const V q = 1.0f / (1.0f + e);
  return x >= 0.0f ? q : e * q;
}

// max(x, 0) + log1p(e^-|x|), as the reference kernel computes it.
template <typename V>
NIMBUS_ALWAYS_INLINE V softplus(V x) {
  const V positive = x > 0.0f ? x : splat<V>(0.0f);
  return positive + log1p(exp(-simd::abs(x)));
}

// erf, fitted by scripts/fit_vector_math.py: x P(x^2) for |x| < 1; for 1 <= |x| <= 4
// 1 - e^(Q(|x| - 2.5) - x^2) (erfc through its logarithm, which a short
// polynomial follows); erf rounds to +-1 in f32 beyond 4.
template <typename V>
NIMBUS_ALWAYS_INLINE V erf(V x) {
  const V ax = simd::abs(x);
  const V t = x * x;
  V p = splat<V>(7.87587506269e-5f);
  p = p * t - 8.01686428717e-4f;
  p = p * t + 5.18908742343e-3f;
  p = p * t - 2.68542120106e-2f;
  p = p * t + 1.12835947152e-1f;
  p = p * t - 3.76126266667e-1f;
  p = p * t + 1.12837916585f;
  const V small = p * ax;
  const V c = simd::clamp_above(ax, 4.0f);
  const V s = c - 2.5f;
  V q = splat<V>(1.63715141459e-6f);
  q = q * s - 1.33150143973e-5f;
  q = q * s + 7.72913761538e-5f;
  q = q * s - 4.20122523541e-4f;
  q = q * s + 2.16530354916e-3f;
  q = q * s - 1.08585416429e-2f;
  q = q * s + 5.61062963893e-2f;
  q = q * s - 3.52680674224e-1f;
  q = q * s - 1.55681527273f;
  const V large = 1.0f - exp(q - c * c);
  return simd::copysign(ax < 1.0f ? small : large, x);
}

inline constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float kGeluCubic = 0.044715f;
inline constexpr float kInvSqrt2 = 0.7071067811865476f;

// e^x for x in [-87, 88], where 2^n is one normal f32 (callers clamp): exp's
// reduction with a degree-5 polynomial (absolute error 7.9e-8 on
// [-ln2/2, ln2/2], ~2 ulp in all) and a single scale. For compute-bound
// callers that tolerate 2 ulp.
template <typename V>
NIMBUS_ALWAYS_INLINE V exp_normal_range(V x) {
  simd::MaskOf<V> ni;
  const V r = reduce_by_ln2(x, ni);
  V p = splat<V>(8.36914849086e-3f);
  p = p * r + 4.19175072496e-2f;
  p = p * r + 1.66665052604e-1f;
  p = p * r + 4.99988693783e-1f;
  p = p * r + 1.00000001077f;
  p = p * r + 1.00000007545f;
  return p * simd::bits<V>((ni + 127) << 23);
}

// 0.5 x (1 + tanh(y)) with y = sqrt(2/pi) (x + 0.044715 x^3), written as
// x sigmoid(2y) = x / (1 + e^-2y): the same function without the cancellation
// of 1 + tanh(y) for negative x. gelu is compute-bound, so e^-2y comes from
// exp_normal_range: below -87 it is 0 to f32 precision (the result is x), and
// above 88 it is inf as in the reference (x / inf: -0, or NaN for x = -inf).
template <typename V>
NIMBUS_ALWAYS_INLINE V gelu_tanh(V x) {
  const V minus_2y = x * (-2.0f * kSqrt2OverPi - 2.0f * kSqrt2OverPi * kGeluCubic * (x * x));
  const V e = exp_normal_range(simd::clamp_above(simd::clamp_below(minus_2y, -87.0f), 88.0f));
  return x / (1.0f + (minus_2y > 88.0f ? splat<V>(__builtin_huge_valf()) : e));
}

// d/dx gelu_tanh = s + x 2 s (1 - s) y', s = sigmoid(2y), y' = sqrt(2/pi) (1 + 3 0.044715 x^2);
// s (1 - s) = e / (1 + e)^2 with e = e^-2|y| stays accurate on both tails.
template <typename V>
NIMBUS_ALWAYS_INLINE V gelu_tanh_derivative(V x) {
  const V y = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  const V e = exp(-2.0f * simd::abs(y));
  const V q = 1.0f / (1.0f + e);
  const V s = y >= 0.0f ? q : e * q;
  const V slope = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  return s + x * (2.0f * e * q * q) * slope;
}

// x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)).
template <typename V>
NIMBUS_ALWAYS_INLINE V gelu_erf(V x) {
  return 0.5f * x * (1.0f + erf(x * kInvSqrt2));
}

// Phi(x) + x phi(x) = 0.5 (1 + erf(x / sqrt 2) + x sqrt(2/pi) e^(-x^2/2)),
// written with a single product feeding the sum: every compilation (8 or 16
// lanes) then contracts it into the same FMA and gives the same bits.
template <typename V>
NIMBUS_ALWAYS_INLINE V gelu_erf_derivative(V x) {
  return 0.5f * ((1.0f + erf(x * kInvSqrt2)) + x * (exp(-0.5f * x * x) * kSqrt2OverPi));
}

}  // namespace nimbus::cpu::vmath
