// layer_norm and layer_norm_backward on CUDA (f32), the CPU reference's
// formulas (src/ops/normalization.cc) with sums in double.
//
// Launch shapes (256 threads a block):
//   forward, backward's grad_x: one block per row (rows grid-strided, at most 32 blocks per SM), its
//     threads striding over the features, sums by a shared-memory tree;
//   backward's grad_gamma, grad_beta: one thread per feature summing down the rows.
#include <algorithm>

#include "src/device/cuda/kernels/launch_shape.h"
#include "src/device/cuda/kernels/layer_norm_kernels.h"

namespace nimbus::cuda::kernels {
namespace {

// The block's total of `value` (every thread gets it); `scratch` holds kThreads doubles.
__device__ double block_sum(double value, double* scratch) {
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) scratch[threadIdx.x] += scratch[threadIdx.x + half];
    __syncthreads();
  }
  const double total = scratch[0];
  __syncthreads();  // scratch is reused by the next sum
  return total;
}

__global__ void layer_norm_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                  const float* __restrict__ beta, float* __restrict__ y, float* __restrict__ mean,
                                  float* __restrict__ rstd, int64_t rows, int64_t features, double epsilon) {
  __shared__ double scratch[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = x + r * features;
    double total = 0;
    for (int64_t j = threadIdx.x; j < features; j += blockDim.x) total += row[j];
    const double mu = block_sum(total, scratch) / static_cast<double>(features);
    double squares = 0;
    for (int64_t j = threadIdx.x; j < features; j += blockDim.x) squares += (row[j] - mu) * (row[j] - mu);
    const double rs = 1 / sqrt(block_sum(squares, scratch) / static_cast<double>(features) + epsilon);
    for (int64_t j = threadIdx.x; j < features; j += blockDim.x) {
      y[r * features + j] = static_cast<float>((row[j] - mu) * rs * gamma[j] + beta[j]);
    }
    if (threadIdx.x == 0) {
      mean[r] = static_cast<float>(mu);
      rstd[r] = static_cast<float>(rs);
    }
  }
}

// grad_x = rstd / D (D dxhat - sum(dxhat) - xhat sum(dxhat xhat)), xhat = (x - mean) rstd, dxhat = g gamma.
__global__ void layer_norm_grad_x_kernel(const float* __restrict__ g, const float* __restrict__ x,
                                         const float* __restrict__ gamma, const float* __restrict__ mean,
                                         const float* __restrict__ rstd, float* __restrict__ grad_x, int64_t rows,
                                         int64_t features) {
  __shared__ double scratch[kThreads];
  const double d = static_cast<double>(features);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const double mu = mean[r], rs = rstd[r];
    double sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (int64_t j = threadIdx.x; j < features; j += blockDim.x) {
      const int64_t k = r * features + j;
      const double xhat = (x[k] - mu) * rs, dxhat = double{g[k]} * gamma[j];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * xhat;
    }
    sum_dxhat = block_sum(sum_dxhat, scratch);
    sum_dxhat_xhat = block_sum(sum_dxhat_xhat, scratch);
    for (int64_t j = threadIdx.x; j < features; j += blockDim.x) {
      const int64_t k = r * features + j;
      const double xhat = (x[k] - mu) * rs, dxhat = double{g[k]} * gamma[j];
      grad_x[k] = static_cast<float>(rs / d * (d * dxhat - sum_dxhat - xhat * sum_dxhat_xhat));
    }
  }
}

__global__ void layer_norm_grad_parameters_kernel(const float* __restrict__ g, const float* __restrict__ x,
                                                  const float* __restrict__ mean, const float* __restrict__ rstd,
                                                  float* __restrict__ grad_gamma, float* __restrict__ grad_beta,
                                                  int64_t rows, int64_t features) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < features; j += int64_t{gridDim.x} * blockDim.x) {
    double sum_gamma = 0, sum_beta = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t k = r * features + j;
      sum_gamma += g[k] * ((x[k] - double{mean[r]}) * rstd[r]);
      sum_beta += g[k];
    }
    grad_gamma[j] = static_cast<float>(sum_gamma);
    grad_beta[j] = static_cast<float>(sum_beta);
  }
}

unsigned row_blocks(int64_t rows, int sms) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(rows, int64_t{32} * sms)));
}

}  // namespace

cudaError_t layer_norm(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                       int64_t rows, int64_t features, double epsilon, int sms, cudaStream_t stream) {
  layer_norm_kernel<<<row_blocks(rows, sms), kThreads, 0, stream>>>(x, gamma, beta, y, mean, rstd, rows, features,
                                                                    epsilon);
  return cudaGetLastError();
}

cudaError_t layer_norm_backward(const float* grad_y, const float* x, const float* gamma, const float* mean,
                                const float* rstd, float* grad_x, float* grad_gamma, float* grad_beta, int64_t rows,
                                int64_t features, int sms, cudaStream_t stream) {
  if (rows > 0) {
    layer_norm_grad_x_kernel<<<row_blocks(rows, sms), kThreads, 0, stream>>>(grad_y, x, gamma, mean, rstd, grad_x, rows,
                                                                             features);
  }
  layer_norm_grad_parameters_kernel<<<blocks_for(features, sms), kThreads, 0, stream>>>(
      grad_y, x, mean, rstd, grad_gamma, grad_beta, rows, features);
  return cudaGetLastError();
}

}  // namespace nimbus::cuda::kernels
