// The kernels of cudnn_glue_kernels.h: grid-stride loops, one thread per
// element (256 threads a block, at most 32 blocks per SM). Filters and
// per-channel vectors are small next to the images cuDNN works on.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "src/device/cuda/kernels/cudnn_glue_kernels.h"
#include "src/device/cuda/kernels/launch_shape.h"

namespace nimbus::cuda::kernels {
namespace {

// Consecutive threads write consecutive outputs.
template <typename Word>
__global__ void transpose_kernel(const Word* __restrict__ in, Word* __restrict__ out, int64_t rows, int64_t cols) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * cols;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = i / rows, r = i % rows;  // out[c][r]
    out[i] = in[r * cols + c];
  }
}

__global__ void variance_kernel(const float* __restrict__ inverse_std, float* __restrict__ variance, int64_t n,
                                double epsilon) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const double r = inverse_std[i];
    variance[i] = static_cast<float>(fmax(1.0 / (r * r) - epsilon, 0.0));
  }
}

__global__ void inverse_std_kernel(const float* __restrict__ variance, float* __restrict__ out, int64_t n,
                                   double epsilon) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = static_cast<float>(1.0 / sqrt(static_cast<double>(variance[i]) + epsilon));
  }
}

__device__ float to_float(__half value) { return __half2float(value); }
__device__ float to_float(__nv_bfloat16 value) { return __bfloat162float(value); }
__device__ void store_rounded(float value, __half* out) { *out = __float2half_rn(value); }
__device__ void store_rounded(float value, __nv_bfloat16* out) { *out = __float2bfloat16_rn(value); }

template <typename Half>
__global__ void widen_kernel(const Half* __restrict__ src, float* __restrict__ dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = to_float(src[i]);
  }
}

template <typename Half>
__global__ void narrow_kernel(const float* __restrict__ src, Half* __restrict__ dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    store_rounded(src[i], dst + i);
  }
}

// Per-channel vectors: a few blocks are plenty.
unsigned vector_blocks(int64_t n) { return blocks_for(n, 1); }

}  // namespace

cudaError_t transpose_matrix(const void* in, void* out, int64_t rows, int64_t cols, int element_size, int sms,
                             cudaStream_t stream) {
  const unsigned blocks = blocks_for(rows * cols, sms);
  if (element_size == 2) {
    transpose_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(out),
                                                      rows, cols);
  } else {
    transpose_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint32_t*>(in), static_cast<uint32_t*>(out),
                                                      rows, cols);
  }
  return cudaGetLastError();
}

cudaError_t variance_from_inverse_std(const float* inverse_std, float* variance, int64_t n, double epsilon,
                                      cudaStream_t stream) {
  variance_kernel<<<vector_blocks(n), kThreads, 0, stream>>>(inverse_std, variance, n, epsilon);
  return cudaGetLastError();
}

cudaError_t inverse_std(const float* variance, float* inverse_std, int64_t n, double epsilon, cudaStream_t stream) {
  inverse_std_kernel<<<vector_blocks(n), kThreads, 0, stream>>>(variance, inverse_std, n, epsilon);
  return cudaGetLastError();
}

cudaError_t widen_to_float(const void* src, HalfType type, float* dst, int64_t n, cudaStream_t stream) {
  if (type == HalfType::kF16) {
    widen_kernel<<<vector_blocks(n), kThreads, 0, stream>>>(static_cast<const __half*>(src), dst, n);
  } else {
    widen_kernel<<<vector_blocks(n), kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(src), dst, n);
  }
  return cudaGetLastError();
}

cudaError_t narrow_from_float(const float* src, void* dst, HalfType type, int64_t n, cudaStream_t stream) {
  if (type == HalfType::kF16) {
    narrow_kernel<<<vector_blocks(n), kThreads, 0, stream>>>(src, static_cast<__half*>(dst), n);
  } else {
    narrow_kernel<<<vector_blocks(n), kThreads, 0, stream>>>(src, static_cast<__nv_bfloat16*>(dst), n);
  }
  return cudaGetLastError();
}

}  // namespace nimbus::cuda::kernels
