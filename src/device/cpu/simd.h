// Fixed-width SIMD vectors for our CPU kernels: 32 bytes (8 x f32, 4 x f64,
// 8 x i32, 4 x i64), written with GCC vector extensions so that one source
// serves AVX2 (the x86-64-v3 build) and other targets, where the compiler
// splits them into narrower registers. Arithmetic, comparisons (lane masks of
// all ones or zeros) and `mask ? a : b` work on them as on scalars, so op
// functors are written once as generic lambdas for both. Internal.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace nimbus::cpu::simd {

inline constexpr size_t kVectorBytes = 32;

template <typename T>
struct VecOf {
  typedef T type __attribute__((vector_size(kVectorBytes)));
};
// Vec<float> is 8 x f32, Vec<double> 4 x f64, ...
template <typename T>
using Vec = typename VecOf<T>::type;

template <typename T>
inline constexpr int64_t kLanes = static_cast<int64_t>(kVectorBytes / sizeof(T));

using f32x8 = Vec<float>;
using i32x8 = Vec<int32_t>;

template <typename T>
inline Vec<T> splat(T value) {
  return Vec<T>{} + value;
}

// Unaligned loads and stores (memcpy compiles to one vmovups).
template <typename T>
inline Vec<T> load(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
inline void store(T* p, Vec<T> v) {
  std::memcpy(p, &v, sizeof v);
}

// A store that bypasses the caches (no read-for-ownership of the destination
// line). `p` must be 32-byte aligned; call stream_fence() before other threads
// read the data. Falls back to a plain store where AVX is missing.
template <typename T>
inline void stream(T* p, Vec<T> v) {
#if defined(__AVX__)
  if constexpr (std::is_same_v<T, float>) {
    _mm256_stream_ps(p, std::bit_cast<__m256>(v));
  } else if constexpr (std::is_same_v<T, double>) {
    _mm256_stream_pd(p, std::bit_cast<__m256d>(v));
  } else {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), std::bit_cast<__m256i>(v));
  }
#else
  store(p, v);
#endif
}
inline void stream_fence() {
#if defined(__AVX__)
  _mm_sfence();
#endif
}

// Reinterprets the bits of a vector as another vector type of the same size.
template <typename To, typename From>
inline To bits(From v) {
  return std::bit_cast<To>(v);
}

using f64x4 = Vec<double>;
using i64x4 = Vec<int64_t>;

// |x| by clearing the sign bit (NaN stays NaN, -0 becomes +0).
inline f32x8 abs(f32x8 x) { return bits<f32x8>(bits<i32x8>(x) & 0x7fffffff); }
inline f64x4 abs(f64x4 x) { return bits<f64x4>(bits<i64x4>(x) & 0x7fffffffffffffff); }

// Correctly rounded square roots (vsqrtps / vsqrtpd on AVX).
inline f32x8 sqrt(f32x8 x) {
#if defined(__AVX__)
  return bits<f32x8>(_mm256_sqrt_ps(bits<__m256>(x)));
#else
  for (int64_t i = 0; i < kLanes<float>; ++i) x[i] = __builtin_sqrtf(x[i]);
  return x;
#endif
}
inline f64x4 sqrt(f64x4 x) {
#if defined(__AVX__)
  return bits<f64x4>(_mm256_sqrt_pd(bits<__m256d>(x)));
#else
  for (int64_t i = 0; i < kLanes<double>; ++i) x[i] = __builtin_sqrt(x[i]);
  return x;
#endif
}

// The magnitude of `magnitude` with the sign bit of `sign`.
inline f32x8 copysign(f32x8 magnitude, f32x8 sign) {
  return bits<f32x8>((bits<i32x8>(magnitude) & 0x7fffffff) | (bits<i32x8>(sign) & static_cast<int32_t>(0x80000000u)));
}
// Clamps that let NaN through (maxps and minps return their second operand
// when either is NaN; a comparison with NaN is false).
inline f32x8 clamp_below(f32x8 x, float low) {
#if defined(__AVX__)
  return bits<f32x8>(_mm256_max_ps(_mm256_set1_ps(low), bits<__m256>(x)));
#else
  return x < low ? splat(low) : x;
#endif
}
inline f32x8 clamp_above(f32x8 x, float high) {
#if defined(__AVX__)
  return bits<f32x8>(_mm256_min_ps(_mm256_set1_ps(high), bits<__m256>(x)));
#else
  return x > high ? splat(high) : x;
#endif
}
inline i32x8 is_nan(f32x8 x) { return x != x; }

}  // namespace nimbus::cpu::simd
