// Launchers of src/device/cuda/kernels/layout_kernels.cu (transpose, slice,
// pad, broadcast_to), compiled by nvcc: plain C++17 with the runtime's types, like kernels.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace nimbus::cuda::kernels {

// Output element c (a multi-index over `dims`) reads source coordinate s_d = c_d - shift_d along each
// output axis d; the source element is at sum s_d * strides[d] (strides of the source axis that output
// axis d walks). Where any s_d falls outside [0, source_dims[d]) the output is `pattern` (pad's value).
// transpose: strides permuted, shift 0; slice: shift = -begin; pad: shift = the padding before;
// broadcast_to: stride 0 along the broadcast axes, source_dims = dims.
struct Remap {
  int rank = 0;
  int64_t dims[8] = {};
  int64_t source_dims[8] = {};
  int64_t shift[8] = {};
  int64_t strides[8] = {};
};

// `element_size` is 1, 2, 4 or 8 bytes; `pattern` holds the fill value's bytes.
cudaError_t remap(const void* x, void* out, int64_t n, int element_size, const Remap& shape, uint64_t pattern, int sms,
                  cudaStream_t stream);

}  // namespace nimbus::cuda::kernels
