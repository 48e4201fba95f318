// adam_update's kernel (adam_kernels.h): multi-tensor apply, as PyTorch's
// fused Adam and apex's FusedAdam do it. The launch's argument holds up to 64
// tensors' pointers and sizes; its grid covers every tensor in chunks of
// kChunk elements, and each block finds its tensor from the chunk counts
// before it. 256 threads a block, each walking kChunk / 256 elements with the
// block's stride, so consecutive threads touch consecutive elements.
//
// Every operation is a round-to-nearest intrinsic (__fmul_rn, ...), which
// nvcc never contracts into an FMA: the results equal the CPU reference's.

#include "src/device/cuda/kernels/adam_kernels.h"
#include "src/device/cuda/kernels/launch_shape.h"

namespace nimbus::cuda::kernels {
namespace {

constexpr int64_t kChunk = 4096;

struct AdamLaunch {
  float* weight[kAdamTensorsPerLaunch];
  float* m[kAdamTensorsPerLaunch];
  float* v[kAdamTensorsPerLaunch];
  const float* gradient[kAdamTensorsPerLaunch];
  int64_t size[kAdamTensorsPerLaunch];
  int first_block[kAdamTensorsPerLaunch + 1];  // tensor k's chunks are blocks [first_block[k], first_block[k + 1])
  int count;
};
static_assert(sizeof(AdamLaunch) + sizeof(AdamScalars) <= 4096, "kernel arguments must stay under 4 KiB");

__global__ void adam_kernel(const AdamLaunch launch, const AdamScalars scalars) {
  if (scalars.apply != nullptr && !*scalars.apply) return;
  const int block = static_cast<int>(blockIdx.x);
  int k = 0;
  while (launch.first_block[k + 1] <= block) ++k;
  const int64_t begin = (block - launch.first_block[k]) * kChunk;
  const int64_t end = min(begin + kChunk, launch.size[k]);
  float* __restrict__ weight = launch.weight[k];
  float* __restrict__ m = launch.m[k];
  float* __restrict__ v = launch.v[k];
  const float* __restrict__ gradient = launch.gradient[k];
  const float alpha = static_cast<float>(*scalars.alpha);
  const float decay = static_cast<float>(*scalars.decay);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    float w = weight[i];
    if (scalars.weight_decay) w = __fsub_rn(w, __fmul_rn(w, decay));
    const float g = gradient[i], old_m = m[i], old_v = v[i];
    const float new_m = __fadd_rn(old_m, __fmul_rn(__fsub_rn(g, old_m), scalars.one_minus_beta_1));
    const float new_v = __fadd_rn(old_v, __fmul_rn(__fsub_rn(__fmul_rn(g, g), old_v), scalars.one_minus_beta_2));
    m[i] = new_m;
    v[i] = new_v;
    weight[i] = __fsub_rn(w, __fdiv_rn(__fmul_rn(new_m, alpha), __fadd_rn(__fsqrt_rn(new_v), scalars.epsilon)));
  }
}

}  // namespace

cudaError_t adam_update(const AdamTensor* tensors, int count, const AdamScalars& scalars, cudaStream_t stream) {
  int k = 0;  // the next tensor to place in a launch
  while (k < count) {
    AdamLaunch launch{};
    int blocks = 0;
    for (; k < count && launch.count < kAdamTensorsPerLaunch; ++k) {
      const AdamTensor& t = tensors[k];
      if (t.size == 0) continue;
      const int j = launch.count++;
      launch.weight[j] = t.weight;
      launch.m[j] = t.m;
      launch.v[j] = t.v;
      launch.gradient[j] = t.gradient;
      launch.size[j] = t.size;
      launch.first_block[j] = blocks;
      blocks += static_cast<int>((t.size + kChunk - 1) / kChunk);
    }
    for (int j = launch.count; j <= kAdamTensorsPerLaunch; ++j) launch.first_block[j] = blocks;
    if (blocks == 0) continue;
    adam_kernel<<<blocks, kThreads, 0, stream>>>(launch, scalars);
    if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  }
  return cudaSuccess;
}

}  // namespace nimbus::cuda::kernels
