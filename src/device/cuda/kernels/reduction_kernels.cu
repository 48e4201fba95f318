// Reductions (f32, bf16, f16) and sparse softmax cross-entropy (f32),
// accumulated in double like the CPU reference kernels (src/ops/reduction.cc,
// src/ops/cross_entropy.cc), so the two agree to rounding; a 16-bit result is
// rounded once, as the reference's f32 sum of the widened elements is. Both
// read each element once, so the double arithmetic hides behind the loads.
// Softmax and log-softmax (f32) compute in float, as the CPU's vectorized
// kernel (src/kernels/cpu/softmax_kernels.cc) and PyTorch do: they take two
// exponentials per element, and double exp runs at 1/32 to 1/64 of the float
// rate on the cloud's T4, L4 and A10G (over attention's scores that is
// milliseconds a step); summing at most a row in float stays well inside the
// 1e-5 the cross-backend cases ask.
//
// Launch shapes (256 threads a block, grid-stride loops, at most 32 blocks per SM):
//   reductions: one thread per output element walking its reduced elements, or, for 256 or more of
//     them, one block per output element and a shared-memory tree;
//   softmax, log-softmax over the last axis: one warp per row (coalesced loads, shuffles); over another
//     axis: one thread per (outer, inner) row of the axis;
//   cross-entropy: one thread per example.
// A thread per row suits the short rows of classifier heads; attention's rows
// (512 and more) want the warp per row, whose loads are coalesced (docs/cuda.md).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>

#include "src/device/cuda/kernels/kernels.h"
#include "src/device/cuda/kernels/launch_shape.h"

namespace nimbus::cuda::kernels {
namespace {

// Elements of each FloatType read as double and written from it.
__device__ __forceinline__ double load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ double load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ double load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ void store(float* p, int64_t i, double v) { p[i] = static_cast<float>(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, int64_t i, double v) {
  p[i] = __float2bfloat16_rn(static_cast<float>(v));
}
__device__ __forceinline__ void store(__half* p, int64_t i, double v) { p[i] = __float2half_rn(static_cast<float>(v)); }

template <Reduce kind>
__device__ __forceinline__ double combine(double acc, double v) {
  if constexpr (kind == Reduce::kMax) {
    return (isnan(v) || v > acc) ? v : acc;  // NaN wins, as in the reference
  } else {
    return acc + v;
  }
}

// `base` plus the offset of element `index` among the kept axes (reduced = false: output index) or the
// reduced ones (reduced = true: the index within one output's reduction).
__device__ __forceinline__ int64_t offset_of(const ReduceShape& a, int64_t index, bool reduced, int64_t base) {
  for (int axis = a.rank - 1; axis >= 0; --axis) {
    if (a.reduced[axis] != reduced) continue;
    base += (index % a.dims[axis]) * a.strides[axis];
    index /= a.dims[axis];
  }
  return base;
}

template <Reduce kind, typename T>
__global__ void reduce_kernel(const T* __restrict__ x, T* __restrict__ y, const ReduceShape a) {
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < a.outputs;
       o += int64_t{gridDim.x} * blockDim.x) {
    const int64_t base = offset_of(a, o, false, 0);
    double acc = kind == Reduce::kMax ? -INFINITY : 0.0;
    for (int64_t r = 0; r < a.count; ++r) {
      acc = combine<kind>(acc, load(x, offset_of(a, r, true, base)));
    }
    store(y, o, kind == Reduce::kMean ? acc / static_cast<double>(a.count) : acc);
  }
}

// One block per output element (outputs grid-strided): its threads stride over the reduced elements, then
// a shared-memory tree. For long reductions (a convolution's bias gradient sums batch x height x width).
template <Reduce kind, typename T>
__global__ void block_reduce_kernel(const T* __restrict__ x, T* __restrict__ y, const ReduceShape a) {
  __shared__ double partial[kThreads];
  for (int64_t o = blockIdx.x; o < a.outputs; o += gridDim.x) {
    const int64_t base = offset_of(a, o, false, 0);
    double acc = kind == Reduce::kMax ? -INFINITY : 0.0;
    for (int64_t r = threadIdx.x; r < a.count; r += blockDim.x) {
      acc = combine<kind>(acc, load(x, offset_of(a, r, true, base)));
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) partial[threadIdx.x] = combine<kind>(partial[threadIdx.x], partial[threadIdx.x + half]);
      __syncthreads();
    }
    if (threadIdx.x == 0) store(y, o, kind == Reduce::kMean ? partial[0] / static_cast<double>(a.count) : partial[0]);
    __syncthreads();  // partial is reused by the next output
  }
}

// Softmax over the last axis (inner == 1, attention's rows): one warp per row, its lanes striding along the
// row so that each load is coalesced, the maximum and the sum combined across the warp by shuffles. A warp
// takes a row at a time (the loop condition is the same for its 32 lanes), so the full-mask shuffles are safe.
__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t length,
                                    bool log_form) {
  constexpr int kWarp = 32;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / kWarp);
  for (int64_t row = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / kWarp; row < rows; row += warps) {
    const float* in = x + row * length;
    float* out = y + row * length;
    float max_value = -INFINITY;
    for (int64_t k = lane; k < length; k += kWarp) max_value = fmaxf(max_value, in[k]);
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      max_value = fmaxf(max_value, __shfl_xor_sync(0xffffffffu, max_value, offset));
    }
    float total = 0;
    for (int64_t k = lane; k < length; k += kWarp) total += expf(in[k] - max_value);
    for (int offset = kWarp / 2; offset > 0; offset /= 2) total += __shfl_xor_sync(0xffffffffu, total, offset);
    const float log_total = logf(total);
    for (int64_t k = lane; k < length; k += kWarp) {
      const float shifted = in[k] - max_value;
      out[k] = log_form ? shifted - log_total : expf(shifted) / total;
    }
  }
}

__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t outer, int64_t length,
                               int64_t inner, bool log_form) {
  for (int64_t row = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; row < outer * inner;
       row += int64_t{gridDim.x} * blockDim.x) {
    const int64_t first = (row / inner) * length * inner + row % inner;
    float max_value = -INFINITY;
    for (int64_t k = 0; k < length; ++k) max_value = fmaxf(max_value, x[first + k * inner]);
    float total = 0;
    for (int64_t k = 0; k < length; ++k) total += expf(x[first + k * inner] - max_value);
    const float log_total = logf(total);
    for (int64_t k = 0; k < length; ++k) {
      const float shifted = x[first + k * inner] - max_value;
      y[first + k * inner] = log_form ? shifted - log_total : expf(shifted) / total;
    }
  }
}

template <typename Label>
__global__ void sparse_cross_entropy_kernel(const float* __restrict__ logits, const Label* __restrict__ labels,
                                            float* __restrict__ loss, int64_t rows, int64_t classes) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows; r += int64_t{gridDim.x} * blockDim.x) {
    const float* row = logits + r * classes;
    const auto label = static_cast<int64_t>(labels[r]);
    double max_value = -INFINITY;
    for (int64_t k = 0; k < classes; ++k) max_value = fmax(max_value, double{row[k]});
    double total = 0;
    for (int64_t k = 0; k < classes; ++k) total += exp(double{row[k]} - max_value);
    loss[r] = label < 0 || label >= classes ? NAN : static_cast<float>(log(total) - (double{row[label]} - max_value));
  }
}

// (softmax(row) - one_hot(label)) * grad_loss[r], a thread per row as in the forward; NaN rows for a label
// outside [0, classes).
template <typename Label>
__global__ void sparse_cross_entropy_backward_kernel(const float* __restrict__ logits, const Label* __restrict__ labels,
                                                     const float* __restrict__ grad_loss,
                                                     float* __restrict__ grad_logits, int64_t rows, int64_t classes) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows; r += int64_t{gridDim.x} * blockDim.x) {
    const float* row = logits + r * classes;
    float* out = grad_logits + r * classes;
    const auto label = static_cast<int64_t>(labels[r]);
    double max_value = -INFINITY;
    for (int64_t k = 0; k < classes; ++k) max_value = fmax(max_value, double{row[k]});
    double total = 0;
    for (int64_t k = 0; k < classes; ++k) total += exp(double{row[k]} - max_value);
    const double lse = max_value + log(total), g = grad_loss[r];
    const bool valid = label >= 0 && label < classes;
    for (int64_t k = 0; k < classes; ++k) {
      out[k] = valid ? static_cast<float>((exp(double{row[k]} - lse) - (k == label ? 1.0 : 0.0)) * g) : NAN;
    }
  }
}

}  // namespace

template <Reduce kind, typename T>
void launch_reduce(const void* x, void* y, const ReduceShape& shape, int sms, cudaStream_t stream) {
  const T* in = static_cast<const T*>(x);
  T* out = static_cast<T*>(y);
  // A thread per output walks `count` elements alone: past a block's worth, a block per output instead.
  if (shape.count >= kThreads) {
    const auto blocks = static_cast<unsigned>(std::min<int64_t>(shape.outputs, int64_t{32} * sms));
    block_reduce_kernel<kind><<<blocks, kThreads, 0, stream>>>(in, out, shape);
  } else {
    reduce_kernel<kind><<<blocks_for(shape.outputs, sms), kThreads, 0, stream>>>(in, out, shape);
  }
}

template <Reduce kind>
void launch_reduce(FloatType type, const void* x, void* y, const ReduceShape& shape, int sms, cudaStream_t stream) {
  switch (type) {
    case FloatType::kF32: launch_reduce<kind, float>(x, y, shape, sms, stream); break;
    case FloatType::kBF16: launch_reduce<kind, __nv_bfloat16>(x, y, shape, sms, stream); break;
    case FloatType::kF16: launch_reduce<kind, __half>(x, y, shape, sms, stream); break;
  }
}

cudaError_t reduce(Reduce kind, FloatType type, const void* x, void* y, const ReduceShape& shape, int sms,
                   cudaStream_t stream) {
  switch (kind) {
    case Reduce::kSum: launch_reduce<Reduce::kSum>(type, x, y, shape, sms, stream); break;
    case Reduce::kMean: launch_reduce<Reduce::kMean>(type, x, y, shape, sms, stream); break;
    case Reduce::kMax: launch_reduce<Reduce::kMax>(type, x, y, shape, sms, stream); break;
  }
  return cudaGetLastError();
}

cudaError_t softmax(const float* x, float* y, int64_t outer, int64_t length, int64_t inner, bool log_form, int sms,
                    cudaStream_t stream) {
  if (inner == 1) {
    softmax_rows_kernel<<<blocks_for(outer * 32, sms), kThreads, 0, stream>>>(x, y, outer, length, log_form);
  } else {
    softmax_kernel<<<blocks_for(outer * inner, sms), kThreads, 0, stream>>>(x, y, outer, length, inner, log_form);
  }
  return cudaGetLastError();
}

cudaError_t sparse_cross_entropy(const float* logits, const void* labels, LabelType label_type, float* loss,
                                 int64_t rows, int64_t classes, int sms, cudaStream_t stream) {
  const unsigned blocks = blocks_for(rows, sms);
  switch (label_type) {
    case LabelType::kI64:
      sparse_cross_entropy_kernel<<<blocks, kThreads, 0, stream>>>(logits, static_cast<const int64_t*>(labels), loss,
                                                                   rows, classes);
      break;
    case LabelType::kI32:
      sparse_cross_entropy_kernel<<<blocks, kThreads, 0, stream>>>(logits, static_cast<const int32_t*>(labels), loss,
                                                                   rows, classes);
      break;
    case LabelType::kU8:
      sparse_cross_entropy_kernel<<<blocks, kThreads, 0, stream>>>(logits, static_cast<const uint8_t*>(labels), loss,
                                                                   rows, classes);
      break;
  }
  return cudaGetLastError();
}

cudaError_t sparse_cross_entropy_backward(const float* logits, const void* labels, LabelType label_type,
                                          const float* grad_loss, float* grad_logits, int64_t rows, int64_t classes,
                                          int sms, cudaStream_t stream) {
  const unsigned blocks = blocks_for(rows, sms);
  switch (label_type) {
    case LabelType::kI64:
      sparse_cross_entropy_backward_kernel<<<blocks, kThreads, 0, stream>>>(logits, static_cast<const int64_t*>(labels),
                                                                            grad_loss, grad_logits, rows, classes);
      break;
    case LabelType::kI32:
      sparse_cross_entropy_backward_kernel<<<blocks, kThreads, 0, stream>>>(logits, static_cast<const int32_t*>(labels),
                                                                            grad_loss, grad_logits, rows, classes);
      break;
    case LabelType::kU8:
      sparse_cross_entropy_backward_kernel<<<blocks, kThreads, 0, stream>>>(logits, static_cast<const uint8_t*>(labels),
                                                                            grad_loss, grad_logits, rows, classes);
      break;
  }
  return cudaGetLastError();
}

}  // namespace nimbus::cuda::kernels
