// conv2d (forward with an optional bias and ReLU, backward input, backward
// filter) and max_pool2d (forward, backward) on CUDA, f32 in and out, conv
// sums accumulated in double like the reference kernels (src/ops/conv.cc,
// src/ops/pooling.cc). Straightforward direct convolutions, not cuDNN:
// correct first, fast later (docs/cuda.md).
//
// Launch shapes (256 threads a block):
//   conv2d, conv2d_backward_input, max_pool2d: one thread per output element, grid-stride;
//   conv2d_backward_filter: one block per filter element, its threads striding over (n, oy, ox),
//     then a shared-memory tree;
//   max_pool2d_backward: grad_x zeroed, then one thread per window adding to its maximum (atomicAdd,
//     exact when windows do not overlap).
#include "src/device/cuda/kernels/kernels.h"
#include "src/device/cuda/kernels/launch_shape.h"

namespace nimbus::cuda::kernels {
namespace {

__device__ __forceinline__ int64_t image_offset(const WindowShape& s, int64_t n, int64_t y, int64_t x, int64_t c,
                                                bool input) {
  const int64_t h = input ? s.in_h : s.out_h, w = input ? s.in_w : s.out_w, channels = input ? s.in_c : s.out_c;
  return s.channels_last ? ((n * h + y) * w + x) * channels + c : ((n * channels + c) * h + y) * w + x;
}

__device__ __forceinline__ int64_t filter_offset(const WindowShape& s, int64_t ky, int64_t kx, int64_t ci, int64_t f) {
  const int64_t per_group = s.in_c / s.groups;
  return s.channels_last ? ((ky * s.kernel_w + kx) * per_group + ci) * s.out_c + f
                         : ((f * per_group + ci) * s.kernel_h + ky) * s.kernel_w + kx;
}

// The (n, y, x, c) of element i of an image batch of h x w x channels in the shape's layout.
struct Position {
  int64_t n, y, x, c;
};
__device__ __forceinline__ Position position(const WindowShape& s, int64_t i, int64_t h, int64_t w, int64_t channels) {
  // The three inner axes in memory order, innermost first: (c, x, y) for NHWC, (x, y, c) for NCHW.
  const int64_t inner[3] = {s.channels_last ? channels : w, s.channels_last ? w : h, s.channels_last ? h : channels};
  int64_t digit[3];
  for (int k = 0; k < 3; ++k) {
    digit[k] = i % inner[k];
    i /= inner[k];
  }
  return s.channels_last ? Position{i, digit[2], digit[1], digit[0]} : Position{i, digit[1], digit[0], digit[2]};
}

__global__ void conv2d_kernel(const float* __restrict__ x, const float* __restrict__ filter,
                              const float* __restrict__ bias, bool relu, float* __restrict__ y, const WindowShape s) {
  const int64_t total = s.batch * s.out_h * s.out_w * s.out_c;
  const int64_t per_group = s.in_c / s.groups, filters_per_group = s.out_c / s.groups;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const Position o = position(s, i, s.out_h, s.out_w, s.out_c);
    const int64_t first_channel = (o.c / filters_per_group) * per_group;
    double sum = 0;
    for (int64_t ky = 0; ky < s.kernel_h; ++ky) {
      const int64_t iy = o.y * s.stride_h - s.pad_top + ky * s.dilation_h;
      if (iy < 0 || iy >= s.in_h) continue;
      for (int64_t kx = 0; kx < s.kernel_w; ++kx) {
        const int64_t ix = o.x * s.stride_w - s.pad_left + kx * s.dilation_w;
        if (ix < 0 || ix >= s.in_w) continue;
        for (int64_t ci = 0; ci < per_group; ++ci) {
          sum += double{x[image_offset(s, o.n, iy, ix, first_channel + ci, true)]} *
                 double{filter[filter_offset(s, ky, kx, ci, o.c)]};
        }
      }
    }
    float value = static_cast<float>(sum);
    if (bias != nullptr) value = value + bias[o.c];
    if (relu) value = value < 0.0f ? 0.0f : value;
    y[i] = value;
  }
}

__global__ void conv2d_backward_input_kernel(const float* __restrict__ grad_y, const float* __restrict__ filter,
                                             float* __restrict__ grad_x, const WindowShape s) {
  const int64_t total = s.batch * s.in_h * s.in_w * s.in_c;
  const int64_t per_group = s.in_c / s.groups, filters_per_group = s.out_c / s.groups;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const Position p = position(s, i, s.in_h, s.in_w, s.in_c);
    const int64_t group = p.c / per_group, ci = p.c % per_group;
    double sum = 0;
    for (int64_t ky = 0; ky < s.kernel_h; ++ky) {
      // Output rows oy with oy * stride - pad_top + ky * dilation == p.y.
      const int64_t row = p.y + s.pad_top - ky * s.dilation_h;
      if (row < 0 || row % s.stride_h != 0 || row / s.stride_h >= s.out_h) continue;
      const int64_t oy = row / s.stride_h;
      for (int64_t kx = 0; kx < s.kernel_w; ++kx) {
        const int64_t col = p.x + s.pad_left - kx * s.dilation_w;
        if (col < 0 || col % s.stride_w != 0 || col / s.stride_w >= s.out_w) continue;
        const int64_t ox = col / s.stride_w;
        for (int64_t f = group * filters_per_group; f < (group + 1) * filters_per_group; ++f) {
          sum +=
              double{grad_y[image_offset(s, p.n, oy, ox, f, false)]} * double{filter[filter_offset(s, ky, kx, ci, f)]};
        }
      }
    }
    grad_x[i] = static_cast<float>(sum);
  }
}

__global__ void conv2d_backward_filter_kernel(const float* __restrict__ grad_y, const float* __restrict__ x,
                                              float* __restrict__ grad_filter, const WindowShape s) {
  __shared__ double partial[kThreads];
  const int64_t per_group = s.in_c / s.groups, filters_per_group = s.out_c / s.groups;
  // This block's filter element (ky, kx, ci, f), decoded from the filter's layout.
  int64_t e = blockIdx.x, ky, kx, ci, f;
  if (s.channels_last) {
    f = e % s.out_c;
    e /= s.out_c;
    ci = e % per_group;
    e /= per_group;
    kx = e % s.kernel_w;
    ky = e / s.kernel_w;
  } else {
    kx = e % s.kernel_w;
    e /= s.kernel_w;
    ky = e % s.kernel_h;
    e /= s.kernel_h;
    ci = e % per_group;
    f = e / per_group;
  }
  const int64_t channel = (f / filters_per_group) * per_group + ci;
  const int64_t positions = s.batch * s.out_h * s.out_w;
  double sum = 0;
  for (int64_t q = threadIdx.x; q < positions; q += blockDim.x) {
    const int64_t ox = q % s.out_w, oy = (q / s.out_w) % s.out_h, n = q / (s.out_w * s.out_h);
    const int64_t iy = oy * s.stride_h - s.pad_top + ky * s.dilation_h;
    const int64_t ix = ox * s.stride_w - s.pad_left + kx * s.dilation_w;
    if (iy < 0 || iy >= s.in_h || ix < 0 || ix >= s.in_w) continue;
    sum += double{grad_y[image_offset(s, n, oy, ox, f, false)]} * double{x[image_offset(s, n, iy, ix, channel, true)]};
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) grad_filter[blockIdx.x] = static_cast<float>(partial[0]);
}

// The offset in x of the first maximum of output window i's taps (the first tap when all are NaN).
__device__ __forceinline__ int64_t first_max(const float* __restrict__ x, const WindowShape& s, const Position& o) {
  int64_t best = -1;
  for (int64_t ky = 0; ky < s.kernel_h; ++ky) {
    const int64_t iy = o.y * s.stride_h - s.pad_top + ky;
    if (iy < 0 || iy >= s.in_h) continue;
    for (int64_t kx = 0; kx < s.kernel_w; ++kx) {
      const int64_t ix = o.x * s.stride_w - s.pad_left + kx;
      if (ix < 0 || ix >= s.in_w) continue;
      const int64_t tap = image_offset(s, o.n, iy, ix, o.c, true);
      if (best < 0 || x[tap] > x[best]) best = tap;
    }
  }
  return best;
}

__global__ void max_pool2d_kernel(const float* __restrict__ x, float* __restrict__ y, const WindowShape s) {
  const int64_t total = s.batch * s.out_h * s.out_w * s.out_c;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t best = first_max(x, s, position(s, i, s.out_h, s.out_w, s.out_c));
    y[i] = best < 0 ? NAN : x[best];
  }
}

__global__ void max_pool2d_backward_kernel(const float* __restrict__ grad_y, const float* __restrict__ x,
                                           float* __restrict__ grad_x, const WindowShape s) {
  const int64_t total = s.batch * s.out_h * s.out_w * s.out_c;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t best = first_max(x, s, position(s, i, s.out_h, s.out_w, s.out_c));
    if (best >= 0) atomicAdd(grad_x + best, grad_y[i]);
  }
}

int64_t outputs(const WindowShape& s) { return s.batch * s.out_h * s.out_w * s.out_c; }

}  // namespace

cudaError_t conv2d(const float* x, const float* filter, const float* bias, bool relu, float* y,
                   const WindowShape& shape, int sms, cudaStream_t stream) {
  conv2d_kernel<<<blocks_for(outputs(shape), sms), kThreads, 0, stream>>>(x, filter, bias, relu, y, shape);
  return cudaGetLastError();
}

cudaError_t conv2d_backward_input(const float* grad_y, const float* filter, float* grad_x, const WindowShape& shape,
                                  int sms, cudaStream_t stream) {
  const int64_t inputs = shape.batch * shape.in_h * shape.in_w * shape.in_c;
  conv2d_backward_input_kernel<<<blocks_for(inputs, sms), kThreads, 0, stream>>>(grad_y, filter, grad_x, shape);
  return cudaGetLastError();
}

cudaError_t conv2d_backward_filter(const float* grad_y, const float* x, float* grad_filter, const WindowShape& shape,
                                   cudaStream_t stream) {
  const int64_t elements = shape.kernel_h * shape.kernel_w * (shape.in_c / shape.groups) * shape.out_c;
  if (elements == 0) return cudaSuccess;
  conv2d_backward_filter_kernel<<<static_cast<unsigned>(elements), kThreads, 0, stream>>>(grad_y, x, grad_filter,
                                                                                          shape);
  return cudaGetLastError();
}

cudaError_t max_pool2d(const float* x, float* y, const WindowShape& shape, int sms, cudaStream_t stream) {
  max_pool2d_kernel<<<blocks_for(outputs(shape), sms), kThreads, 0, stream>>>(x, y, shape);
  return cudaGetLastError();
}

cudaError_t max_pool2d_backward(const float* grad_y, const float* x, float* grad_x, const WindowShape& shape, int sms,
                                cudaStream_t stream) {
  const size_t bytes = sizeof(float) * static_cast<size_t>(shape.batch * shape.in_h * shape.in_w * shape.in_c);
  if (const cudaError_t status = cudaMemsetAsync(grad_x, 0, bytes, stream); status != cudaSuccess) return status;
  max_pool2d_backward_kernel<<<blocks_for(outputs(shape), sms), kThreads, 0, stream>>>(grad_y, x, grad_x, shape);
  return cudaGetLastError();
}

}  // namespace nimbus::cuda::kernels
