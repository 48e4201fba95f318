// Vectorized conversions between f32 and the 16-bit float storage types, for
// the kernels that compute f16 and bf16 data in f32 (this CPU family has no
// 16-bit arithmetic): F16C's vcvtph2ps / vcvtps2ph for f16, a shift and an
// integer rounding for bf16. Every conversion gives exactly what Half and
// BFloat16 (nimbus/base/half.h) give element by element: round to nearest
// even, NaN kept a (quiet) NaN, overflow to inf, f16 subnormals exact.
// Internal.
#pragma once

#include <cstdint>

#include "nimbus/base/dtype.h"
#include "nimbus/base/half.h"

namespace nimbus::cpu {

void widen(const Half* in, float* out, int64_t n);
void widen(const BFloat16* in, float* out, int64_t n);
void narrow(const float* in, Half* out, int64_t n);
void narrow(const float* in, BFloat16* out, int64_t n);

inline bool is_16_bit_float(DType dtype) { return dtype == DType::kF16 || dtype == DType::kBF16; }

// The same for a 16-bit float dtype given at run time (is_16_bit_float(dtype) must hold).
void widen(DType dtype, const void* in, float* out, int64_t n);
void narrow(const float* in, DType dtype, void* out, int64_t n);
// Rounds f32 values in place to the nearest value of `dtype` (kF16 or kBF16): narrow and widen in one.
void round_to(DType dtype, float* values, int64_t n);

}  // namespace nimbus::cpu
