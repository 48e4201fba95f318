// fused_conv2d's bias and ReLU for 16-bit convolutions (kernels.h's
// bias_activation): cuDNN's convolution writes y, then one pass adds the
// bias (and applies ReLU) in float and rounds once, as the reference's
// convolution followed by a bias add in the same dtype does. Grid-stride, one
// thread per element (256 threads a block, at most 32 blocks per SM).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "src/device/cuda/kernels/kernels.h"
#include "src/device/cuda/kernels/launch_shape.h"

namespace nimbus::cuda::kernels {
namespace {

__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ void narrow(float v, __nv_bfloat16* out) { *out = __float2bfloat16_rn(v); }
__device__ __forceinline__ void narrow(float v, __half* out) { *out = __float2half_rn(v); }

template <typename T>
__global__ void bias_activation_kernel(T* __restrict__ y, const T* __restrict__ bias, int64_t n, int64_t channels,
                                       bool relu) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = widen(y[i]) + widen(bias[i % channels]);
    narrow(relu && v < 0.0f ? 0.0f : v, &y[i]);  // the reference's relu: NaN stays NaN
  }
}

}  // namespace

cudaError_t bias_activation(FloatType type, void* y, const void* bias, int64_t n, int64_t channels, bool relu, int sms,
                            cudaStream_t stream) {
  const unsigned blocks = blocks_for(n, sms);
  if (type == FloatType::kBF16) {
    bias_activation_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(y),
                                                            static_cast<const __nv_bfloat16*>(bias), n, channels, relu);
  } else if (type == FloatType::kF16) {
    bias_activation_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__half*>(y), static_cast<const __half*>(bias),
                                                            n, channels, relu);
  } else {
    return cudaErrorInvalidValue;  // f32 takes cuDNN's own bias calls
  }
  return cudaGetLastError();
}

}  // namespace nimbus::cuda::kernels
