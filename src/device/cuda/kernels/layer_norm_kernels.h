// Launchers of src/device/cuda/kernels/layer_norm_kernels.cu, compiled by nvcc:
// plain C++17 with the runtime's types, like kernels.h. f32, rows of
// `features` contiguous elements, statistics in double like the CPU reference.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace nimbus::cuda::kernels {

// y = (x - mean) rstd gamma + beta per row; mean and rstd = 1 / sqrt(var + epsilon) per row.
cudaError_t layer_norm(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                       int64_t rows, int64_t features, double epsilon, int sms, cudaStream_t stream);

// grad_x (rows, features) and grad_gamma, grad_beta (features) from grad_y, x, gamma, mean, rstd.
cudaError_t layer_norm_backward(const float* grad_y, const float* x, const float* gamma, const float* mean,
                                const float* rstd, float* grad_x, float* grad_gamma, float* grad_beta, int64_t rows,
                                int64_t features, int sms, cudaStream_t stream);

}  // namespace nimbus::cuda::kernels
