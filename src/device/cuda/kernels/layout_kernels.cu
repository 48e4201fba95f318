// transpose, slice, pad and broadcast_to on CUDA as one remapping kernel: one thread per
// output element, grid-stride (256 threads a block, at most 32 blocks per
// SM), moving whole elements as 1-, 2-, 4- or 8-byte words (any dtype).
#include "src/device/cuda/kernels/launch_shape.h"
#include "src/device/cuda/kernels/layout_kernels.h"

namespace nimbus::cuda::kernels {
namespace {

template <typename Word>
__global__ void remap_kernel(const Word* __restrict__ x, Word* __restrict__ out, int64_t n, const Remap r, Word fill) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t rest = i, offset = 0;
    bool inside = true;
    for (int d = r.rank - 1; d >= 0; --d) {
      const int64_t s = rest % r.dims[d] - r.shift[d];
      rest /= r.dims[d];
      inside = inside && s >= 0 && s < r.source_dims[d];
      offset += s * r.strides[d];
    }
    out[i] = inside ? x[offset] : fill;
  }
}

template <typename Word>
void launch(const void* x, void* out, int64_t n, const Remap& shape, uint64_t pattern, int sms, cudaStream_t stream) {
  remap_kernel<<<blocks_for(n, sms), kThreads, 0, stream>>>(static_cast<const Word*>(x), static_cast<Word*>(out), n,
                                                            shape, static_cast<Word>(pattern));
}

}  // namespace

cudaError_t remap(const void* x, void* out, int64_t n, int element_size, const Remap& shape, uint64_t pattern, int sms,
                  cudaStream_t stream) {
  switch (element_size) {
    case 1: launch<uint8_t>(x, out, n, shape, pattern, sms, stream); break;
    case 2: launch<uint16_t>(x, out, n, shape, pattern, sms, stream); break;
    case 4: launch<uint32_t>(x, out, n, shape, pattern, sms, stream); break;
    default: launch<uint64_t>(x, out, n, shape, pattern, sms, stream); break;
  }
  return cudaGetLastError();
}

}  // namespace nimbus::cuda::kernels
