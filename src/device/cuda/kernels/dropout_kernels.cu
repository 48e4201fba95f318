// dropout_mask on CUDA: one thread per element, grid-stride (256 threads a
// block, at most 32 blocks per SM), drawing from the same counter-based
// Philox stream as the CPU reference (nimbus/base/philox.h), so a seed and
// offset give the CPU's mask bit for bit.
#include "nimbus/base/philox.h"
#include "src/device/cuda/kernels/dropout_kernels.h"
#include "src/device/cuda/kernels/launch_shape.h"

namespace nimbus::cuda::kernels {
namespace {

template <typename Word>
__global__ void dropout_mask_kernel(Word* __restrict__ out, int64_t n, uint64_t seed, uint64_t offset, double rate,
                                    Word keep, Word drop) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = philox_uniform_f32(seed, offset + static_cast<uint64_t>(i)) < rate ? drop : keep;
  }
}

template <typename Word>
void launch(void* out, int64_t n, uint64_t seed, uint64_t offset, double rate, uint64_t keep, uint64_t drop, int sms,
            cudaStream_t stream) {
  dropout_mask_kernel<<<blocks_for(n, sms), kThreads, 0, stream>>>(static_cast<Word*>(out), n, seed, offset, rate,
                                                                   static_cast<Word>(keep), static_cast<Word>(drop));
}

}  // namespace

cudaError_t dropout_mask(void* out, int64_t n, int element_size, uint64_t seed, uint64_t offset, double rate,
                         uint64_t keep, uint64_t drop, int sms, cudaStream_t stream) {
  switch (element_size) {
    case 2: launch<uint16_t>(out, n, seed, offset, rate, keep, drop, sms, stream); break;
    case 4: launch<uint32_t>(out, n, seed, offset, rate, keep, drop, sms, stream); break;
    default: launch<uint64_t>(out, n, seed, offset, rate, keep, drop, sms, stream); break;
  }
  return cudaGetLastError();
}

}  // namespace nimbus::cuda::kernels
