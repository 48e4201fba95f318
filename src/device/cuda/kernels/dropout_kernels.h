// Launcher of src/device/cuda/kernels/dropout_kernels.cu, compiled by nvcc.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace nimbus::cuda::kernels {

// dropout_mask: element i is `drop` where uniform number (offset + i) of Philox stream `seed` is below
// `rate`, else `keep` (both the bytes of one element of `element_size` = 2, 4 or 8 bytes).
cudaError_t dropout_mask(void* out, int64_t n, int element_size, uint64_t seed, uint64_t offset, double rate,
                         uint64_t keep, uint64_t drop, int sms, cudaStream_t stream);

}  // namespace nimbus::cuda::kernels
