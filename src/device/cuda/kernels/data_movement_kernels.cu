// fill and one_hot on CUDA: one thread per output element, grid-stride
// (256 threads a block, at most 32 blocks per SM).

#include "src/device/cuda/kernels/kernels.h"
#include "src/device/cuda/kernels/launch_shape.h"

namespace nimbus::cuda::kernels {
namespace {

template <typename Word>
__global__ void fill_kernel(Word* __restrict__ out, int64_t n, Word value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = value;
  }
}

template <typename Id>
__global__ void one_hot_kernel(const Id* __restrict__ ids, float* __restrict__ out, int64_t rows, int64_t depth,
                               float on, float off) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * depth;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = static_cast<int64_t>(ids[i / depth]) == i % depth ? on : off;
  }
}

}  // namespace

cudaError_t fill(void* out, int64_t n, int element_size, uint64_t pattern, int sms, cudaStream_t stream) {
  const unsigned blocks = blocks_for(n, sms);
  switch (element_size) {
    case 1:
      fill_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<uint8_t*>(out), n, static_cast<uint8_t>(pattern));
      break;
    case 2:
      fill_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<uint16_t*>(out), n, static_cast<uint16_t>(pattern));
      break;
    case 4:
      fill_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<uint32_t*>(out), n, static_cast<uint32_t>(pattern));
      break;
    default: fill_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<uint64_t*>(out), n, pattern); break;
  }
  return cudaGetLastError();
}

cudaError_t one_hot(const void* ids, LabelType id_type, float* out, int64_t rows, int64_t depth, float on, float off,
                    int sms, cudaStream_t stream) {
  const unsigned blocks = blocks_for(rows * depth, sms);
  switch (id_type) {
    case LabelType::kI64:
      one_hot_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const int64_t*>(ids), out, rows, depth, on, off);
      break;
    case LabelType::kI32:
      one_hot_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const int32_t*>(ids), out, rows, depth, on, off);
      break;
    case LabelType::kU8:
      one_hot_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint8_t*>(ids), out, rows, depth, on, off);
      break;
  }
  return cudaGetLastError();
}

}  // namespace nimbus::cuda::kernels
