// Fixed-width SIMD vectors for our CPU kernels, written with GCC vector
// extensions so that one source serves every target: Vec<float> is 32 bytes
// (8 x f32: AVX2 on the x86-64-v3 build, narrower registers elsewhere) and
// Vec<float, 64> is 64 bytes (16 x f32) for code compiled under
// NIMBUS_TARGET_AVX512 on CPUs that have it. Arithmetic, comparisons (lane
// masks of all ones or zeros) and `mask ? a : b` work on them as on scalars,
// so op functors are written once as generic lambdas for scalars and vectors.
//
// Everything here is always_inline: code reached from a NIMBUS_TARGET_AVX512
// function must be inlined into it to be compiled for AVX-512 (an out-of-line
// copy would be compiled for the baseline and shared with it). Internal.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define NIMBUS_ALWAYS_INLINE [[gnu::always_inline]] inline
// The same for a lambda: [](auto x) NIMBUS_LAMBDA_INLINE { ... }.
#define NIMBUS_LAMBDA_INLINE __attribute__((always_inline))

// Compiles a function for AVX-512 (F, DQ, BW, VL) on top of the build's baseline;
// call it only where cpu::has_avx512() is true. Empty off x86-64.
#if defined(__x86_64__)
#define NIMBUS_TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))
#else
#define NIMBUS_TARGET_AVX512
#endif

namespace nimbus::cpu {

// Whether this CPU runs the NIMBUS_TARGET_AVX512 code paths: it has AVX-512,
// and no limit_vector_bytes(32) is in effect.
bool has_avx512();
// Tests run the 32-byte paths on AVX-512 machines with limit_vector_bytes(32);
// 0 lifts the limit.
void limit_vector_bytes(int bytes);

}  // namespace nimbus::cpu

namespace nimbus::cpu::simd {

inline constexpr size_t kVectorBytes = 32;

template <typename T, size_t Bytes>
struct VecOf {
  typedef T type __attribute__((vector_size(Bytes)));
};
// Vec<float> is 8 x f32, Vec<double> 4 x f64, Vec<float, 64> 16 x f32, ...
template <typename T, size_t Bytes = kVectorBytes>
using Vec = typename VecOf<T, Bytes>::type;

template <typename T, size_t Bytes = kVectorBytes>
inline constexpr int64_t kLanes = static_cast<int64_t>(Bytes / sizeof(T));

// The element type of a vector type, and its number of lanes.
template <typename V>
using Element = std::remove_cvref_t<decltype(V{}[0])>;
template <typename V>
inline constexpr int64_t kLanesOf = static_cast<int64_t>(sizeof(V) / sizeof(Element<V>));
// The integer vector of the same shape: what comparisons of V return.
template <typename V>
using MaskOf = decltype(V{} < V{});

using f32x8 = Vec<float>;
using i32x8 = Vec<int32_t>;
using f64x4 = Vec<double>;
using i64x4 = Vec<int64_t>;

template <typename V>
NIMBUS_ALWAYS_INLINE V splat(Element<V> value) {
  return V{} + value;
}

// Unaligned loads and stores (memcpy compiles to one vmovups).
template <typename V>
NIMBUS_ALWAYS_INLINE V load(const Element<V>* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename V>
NIMBUS_ALWAYS_INLINE void store(Element<V>* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// A 32-byte store that bypasses the caches (no read-for-ownership of the
// destination line). `p` must be 32-byte aligned; call stream_fence() before
// other threads read the data. A plain store where AVX is missing.
template <typename T>
NIMBUS_ALWAYS_INLINE void stream(T* p, Vec<T> v) {
#if defined(__AVX__)
  if constexpr (std::is_same_v<T, float>) {
    _mm256_stream_ps(p, std::bit_cast<__m256>(v));
  } else if constexpr (std::is_same_v<T, double>) {
    _mm256_stream_pd(p, std::bit_cast<__m256d>(v));
  } else {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), std::bit_cast<__m256i>(v));
  }
#else
  store<Vec<T>>(p, v);
#endif
}
NIMBUS_ALWAYS_INLINE void stream_fence() {
#if defined(__AVX__)
  _mm_sfence();
#endif
}

// Reinterprets the bits of a vector as another vector type of the same size.
template <typename To, typename From>
NIMBUS_ALWAYS_INLINE To bits(From v) {
  return std::bit_cast<To>(v);
}

// |x| by clearing the sign bit (NaN stays NaN, -0 becomes +0).
template <typename V>
NIMBUS_ALWAYS_INLINE V abs(V x) {
  using Mask = MaskOf<V>;
  return bits<V>(bits<Mask>(x) & static_cast<Element<Mask>>(~(Element<Mask>{1} << (8 * sizeof(Element<Mask>) - 1))));
}

// The magnitude of `magnitude` with the sign bit of `sign` (f32 lanes).
template <typename V>
NIMBUS_ALWAYS_INLINE V copysign(V magnitude, V sign) {
  using Mask = MaskOf<V>;
  return bits<V>((bits<Mask>(magnitude) & 0x7fffffff) | (bits<Mask>(sign) & static_cast<int32_t>(0x80000000u)));
}

// Clamps that let NaN through: a comparison with NaN is false, so `x` is kept
// (on 32-byte f32 vectors, maxps and minps return their second operand when
// either is NaN, which is the same).
template <typename V>
NIMBUS_ALWAYS_INLINE V clamp_below(V x, float low) {
#if defined(__AVX__)
  if constexpr (std::is_same_v<V, f32x8>) return bits<V>(_mm256_max_ps(_mm256_set1_ps(low), bits<__m256>(x)));
#endif
  return x < low ? splat<V>(low) : x;
}
template <typename V>
NIMBUS_ALWAYS_INLINE V clamp_above(V x, float high) {
#if defined(__AVX__)
  if constexpr (std::is_same_v<V, f32x8>) return bits<V>(_mm256_min_ps(_mm256_set1_ps(high), bits<__m256>(x)));
#endif
  return x > high ? splat<V>(high) : x;
}

// Correctly rounded square roots (vsqrtps / vsqrtpd on AVX).
NIMBUS_ALWAYS_INLINE f32x8 sqrt(f32x8 x) {
#if defined(__AVX__)
  return bits<f32x8>(_mm256_sqrt_ps(bits<__m256>(x)));
#else
  for (int64_t i = 0; i < kLanes<float>; ++i) x[i] = __builtin_sqrtf(x[i]);
  return x;
#endif
}
NIMBUS_ALWAYS_INLINE f64x4 sqrt(f64x4 x) {
#if defined(__AVX__)
  return bits<f64x4>(_mm256_sqrt_pd(bits<__m256d>(x)));
#else
  for (int64_t i = 0; i < kLanes<double>; ++i) x[i] = __builtin_sqrt(x[i]);
  return x;
#endif
}

}  // namespace nimbus::cpu::simd
