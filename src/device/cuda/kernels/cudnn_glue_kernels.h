// Small kernels around the cuDNN calls (src/kernels/cuda/cudnn_*.cc): the
// filter layout cuDNN wants, and batch norm's statistics (and 16-bit per-channel values) in our ops' form.
// Plain C++17 with the runtime's types only, like kernels.h; each returns the
// launch's status (cudaGetLastError) for the caller's check.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace nimbus::cuda::kernels {

// out (cols x rows) = the transpose of in (rows x cols), both row-major, elements of 2 or 4 bytes:
// TF's filter (KH * KW * C, F) to cuDNN's NHWC filter (F, KH * KW * C) and back.
cudaError_t transpose_matrix(const void* in, void* out, int64_t rows, int64_t cols, int element_size, int sms,
                             cudaStream_t stream);

// variance[i] = max(1 / inverse_std[i]^2 - epsilon, 0), in double: the biased batch variance
// batch_norm_training returns, from the 1 / sqrt(variance + eps) cuDNN saves.
cudaError_t variance_from_inverse_std(const float* inverse_std, float* variance, int64_t n, double epsilon,
                                      cudaStream_t stream);

// inverse_std[i] = 1 / sqrt(variance[i] + epsilon), in double like the reference: what cuDNN's
// batch-norm backward takes with the mean, from the op's variance input.
cudaError_t inverse_std(const float* variance, float* inverse_std, int64_t n, double epsilon, cudaStream_t stream);

// The 16-bit types batch norm's data may have; its per-channel values go to cuDNN in f32.
enum class HalfType { kF16, kBF16 };

// dst[i] = src[i] widened to f32 (exact): a 16-bit per-channel input (gamma, mean, ...) as cuDNN takes it.
cudaError_t widen_to_float(const void* src, HalfType type, float* dst, int64_t n, cudaStream_t stream);

// dst[i] = src[i] rounded to the 16-bit type (to nearest, ties to even): cuDNN's f32 statistics and
// parameter gradients as our op's outputs in x's dtype.
cudaError_t narrow_from_float(const float* src, void* dst, HalfType type, int64_t n, cudaStream_t stream);

}  // namespace nimbus::cuda::kernels
