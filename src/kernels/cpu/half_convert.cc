#include "src/kernels/cpu/half_convert.h"

#include <algorithm>
#include <cstring>

#include "nimbus/base/error.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace nimbus::cpu {

void widen(const Half* in, float* out, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  }
#endif
  for (; i < n; ++i) out[i] = static_cast<float>(in[i]);
}

void widen(const BFloat16* in, float* out, int64_t n) {
  const uint16_t* bits = reinterpret_cast<const uint16_t*>(in);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(bits[i]) << 16;
    std::memcpy(out + i, &u, sizeof u);
  }
}

void narrow(const float* in, Half* out, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
#endif
  for (; i < n; ++i) out[i] = Half(in[i]);
}

void narrow(const float* in, BFloat16* out, int64_t n) {
  uint16_t* bits = reinterpret_cast<uint16_t*>(out);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, in + i, sizeof u);
    // As BFloat16::from_float: NaN stays a quiet NaN, otherwise round to nearest even.
    const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
    bits[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x0040u : rounded >> 16);
  }
}

void widen(DType dtype, const void* in, float* out, int64_t n) {
  if (dtype == DType::kF16) {
    widen(static_cast<const Half*>(in), out, n);
  } else {
    NIMBUS_ASSERT(dtype == DType::kBF16) << "widen: " << dtype_name(dtype) << " is no 16-bit float";
    widen(static_cast<const BFloat16*>(in), out, n);
  }
}

void narrow(const float* in, DType dtype, void* out, int64_t n) {
  if (dtype == DType::kF16) {
    narrow(in, static_cast<Half*>(out), n);
  } else {
    NIMBUS_ASSERT(dtype == DType::kBF16) << "narrow: " << dtype_name(dtype) << " is no 16-bit float";
    narrow(in, static_cast<BFloat16*>(out), n);
  }
}

void round_to(DType dtype, float* values, int64_t n) {
  if (dtype == DType::kBF16) {
    // The rounded bf16 bits are the upper half of the f32: clear the lower half in place.
    uint32_t* bits = reinterpret_cast<uint32_t*>(values);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t u = bits[i];
      const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
      bits[i] = ((u & 0x7fffffffu) > 0x7f800000u ? u | 0x00400000u : rounded) & 0xffff0000u;
    }
    return;
  }
  // Through a small f16 buffer on the stack, a chunk at a time.
  constexpr int64_t kChunk = 256;
  Half chunk[kChunk];
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t count = std::min(kChunk, n - begin);
    narrow(values + begin, chunk, count);
    widen(chunk, values + begin, count);
  }
}

}  // namespace nimbus::cpu
