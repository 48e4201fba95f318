// argmax, gather and scatter_add on CUDA, grid-stride (256 threads a block,
// at most 32 blocks per SM):
//   argmax: one thread per (outer, inner) row of the axis, comparing in double like the CPU
//     reference (src/ops/reduction.cc);
//   gather: one thread per output element;
//   scatter_add: one thread per update element, atomicAdd into the zeroed output (the order of
//     additions to one entry is not fixed, so duplicates sum to within rounding of the CPU's).
#include "src/device/cuda/kernels/index_kernels.h"
#include "src/device/cuda/kernels/launch_shape.h"

namespace nimbus::cuda::kernels {
namespace {

template <typename T>
__global__ void argmax_kernel(const T* __restrict__ x, int64_t* __restrict__ out, int64_t outer, int64_t length,
                              int64_t inner) {
  for (int64_t row = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; row < outer * inner;
       row += int64_t{gridDim.x} * blockDim.x) {
    const int64_t first = (row / inner) * length * inner + row % inner;
    int64_t best = 0;
    double best_value = static_cast<double>(x[first]);
    for (int64_t k = 1; k < length; ++k) {
      const double v = static_cast<double>(x[first + k * inner]);
      if (v > best_value || (isnan(v) && !isnan(best_value))) {
        best = k;
        best_value = v;
      }
    }
    out[row] = best;
  }
}

template <typename T>
void launch_argmax(const void* x, int64_t* out, int64_t outer, int64_t length, int64_t inner, int sms,
                   cudaStream_t stream) {
  argmax_kernel<<<blocks_for(outer * inner, sms), kThreads, 0, stream>>>(static_cast<const T*>(x), out, outer, length,
                                                                         inner);
}

template <typename Word, typename Index>
__global__ void gather_kernel(const Word* __restrict__ params, const Index* __restrict__ indices,
                              Word* __restrict__ out, int64_t outer, int64_t axis, int64_t inner, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < outer * count * inner;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t in = i % inner, n = (i / inner) % count, o = i / (inner * count);
    const auto index = static_cast<int64_t>(indices[n]);
    out[i] = index >= 0 && index < axis ? params[(o * axis + index) * inner + in] : Word(0);
  }
}

template <typename T, typename Index>
__global__ void scatter_add_kernel(const T* __restrict__ updates, const Index* __restrict__ indices,
                                   T* __restrict__ out, int64_t outer, int64_t axis, int64_t inner, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < outer * count * inner;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t in = i % inner, n = (i / inner) % count, o = i / (inner * count);
    const auto index = static_cast<int64_t>(indices[n]);
    if (index >= 0 && index < axis) atomicAdd(&out[(o * axis + index) * inner + in], updates[i]);
  }
}

template <typename Word>
void launch_gather(const void* params, const void* indices, bool indices_i64, void* out, int64_t outer, int64_t axis,
                   int64_t inner, int64_t count, int sms, cudaStream_t stream) {
  const unsigned blocks = blocks_for(outer * count * inner, sms);
  auto* p = static_cast<const Word*>(params);
  auto* o = static_cast<Word*>(out);
  if (indices_i64) {
    gather_kernel<<<blocks, kThreads, 0, stream>>>(p, static_cast<const int64_t*>(indices), o, outer, axis, inner,
                                                   count);
  } else {
    gather_kernel<<<blocks, kThreads, 0, stream>>>(p, static_cast<const int32_t*>(indices), o, outer, axis, inner,
                                                   count);
  }
}

template <typename T>
void launch_scatter_add(const void* updates, const void* indices, bool indices_i64, void* out, int64_t outer,
                        int64_t axis, int64_t inner, int64_t count, int sms, cudaStream_t stream) {
  const unsigned blocks = blocks_for(outer * count * inner, sms);
  auto* u = static_cast<const T*>(updates);
  auto* o = static_cast<T*>(out);
  if (indices_i64) {
    scatter_add_kernel<<<blocks, kThreads, 0, stream>>>(u, static_cast<const int64_t*>(indices), o, outer, axis, inner,
                                                        count);
  } else {
    scatter_add_kernel<<<blocks, kThreads, 0, stream>>>(u, static_cast<const int32_t*>(indices), o, outer, axis, inner,
                                                        count);
  }
}

}  // namespace

cudaError_t gather(const void* params, const void* indices, bool indices_i64, void* out, int64_t outer, int64_t axis,
                   int64_t inner, int64_t count, int element_size, int sms, cudaStream_t stream) {
  switch (element_size) {
    case 1: launch_gather<uint8_t>(params, indices, indices_i64, out, outer, axis, inner, count, sms, stream); break;
    case 2: launch_gather<uint16_t>(params, indices, indices_i64, out, outer, axis, inner, count, sms, stream); break;
    case 4: launch_gather<uint32_t>(params, indices, indices_i64, out, outer, axis, inner, count, sms, stream); break;
    default: launch_gather<uint64_t>(params, indices, indices_i64, out, outer, axis, inner, count, sms, stream); break;
  }
  return cudaGetLastError();
}

cudaError_t scatter_add(const void* updates, const void* indices, bool indices_i64, void* out, bool f64, int64_t outer,
                        int64_t axis, int64_t inner, int64_t count, int sms, cudaStream_t stream) {
  const cudaError_t zeroed = cudaMemsetAsync(out, 0, static_cast<size_t>(outer * axis * inner) * (f64 ? 8 : 4), stream);
  if (zeroed != cudaSuccess) return zeroed;
  if (outer * count * inner == 0) return cudaSuccess;
  if (f64) {
    launch_scatter_add<double>(updates, indices, indices_i64, out, outer, axis, inner, count, sms, stream);
  } else {
    launch_scatter_add<float>(updates, indices, indices_i64, out, outer, axis, inner, count, sms, stream);
  }
  return cudaGetLastError();
}

cudaError_t argmax(const void* x, ValueType type, int64_t* out, int64_t outer, int64_t length, int64_t inner, int sms,
                   cudaStream_t stream) {
  switch (type) {
    case ValueType::kF32: launch_argmax<float>(x, out, outer, length, inner, sms, stream); break;
    case ValueType::kF64: launch_argmax<double>(x, out, outer, length, inner, sms, stream); break;
    case ValueType::kI32: launch_argmax<int32_t>(x, out, outer, length, inner, sms, stream); break;
    case ValueType::kI64: launch_argmax<int64_t>(x, out, outer, length, inner, sms, stream); break;
    case ValueType::kU8: launch_argmax<uint8_t>(x, out, outer, length, inner, sms, stream); break;
  }
  return cudaGetLastError();
}

}  // namespace nimbus::cuda::kernels
