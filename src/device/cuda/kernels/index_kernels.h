// Launchers of src/device/cuda/kernels/index_kernels.cu (argmax, gather,
// scatter_add), compiled by
// nvcc: plain C++17 with the runtime's types, like kernels.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace nimbus::cuda::kernels {

enum class ValueType { kF32, kF64, kI32, kI64, kU8 };

// For x seen as (outer, length, inner): out[o, i] = the index k of the first maximum of x[o, :, i]
// (a NaN counts as the maximum, its first one winning, as in the CPU reference). i64 out.
cudaError_t argmax(const void* x, ValueType type, int64_t* out, int64_t outer, int64_t length, int64_t inner, int sms,
                   cudaStream_t stream);

// params (outer, axis, inner) and `count` indices (i32 or i64) -> out (outer, count, inner), any dtype as
// `element_size`-byte words. An index outside [0, axis) gives zeros (TensorFlow's GPU gather does the same:
// a kernel cannot throw the CPU's InvalidArgument).
cudaError_t gather(const void* params, const void* indices, bool indices_i64, void* out, int64_t outer, int64_t axis,
                   int64_t inner, int64_t count, int element_size, int sms, cudaStream_t stream);

// out (outer, axis, inner) = zeros, then updates (outer, count, inner) added at the indexed rows with
// atomicAdd (f32 or f64); indices outside [0, axis) are skipped.
cudaError_t scatter_add(const void* updates, const void* indices, bool indices_i64, void* out, bool f64, int64_t outer,
                        int64_t axis, int64_t inner, int64_t count, int sms, cudaStream_t stream);

}  // namespace nimbus::cuda::kernels
