// Our CUDA kernels' launchers, compiled by nvcc from src/device/cuda/kernels/*.cu.
// Plain C++17 with the runtime's types only, so nvcc never parses Nimbus's
// C++20 headers; the ops' registrations (src/kernels/cuda/*_ops.cc) call these.
// Each returns the launch's status (cudaGetLastError) for the caller's check.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace nimbus::cuda::kernels {

inline constexpr int kMaxRank = 8;

// The floating types our reductions and the 16-bit convolution epilogue take: f32, or 16-bit storage
// computed in float (bf16, f16), rounded to nearest even on the store.
enum class FloatType { kF32, kBF16, kF16 };

// A reduction over the axes marked in `reduced` of a contiguous tensor.
struct ReduceShape {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  bool reduced[kMaxRank] = {};
  int64_t outputs = 0;
  int64_t count = 0;  // elements reduced into each output
};
enum class Reduce { kSum, kMean, kMax };

// x and y of one type; sums accumulate in double, and a 16-bit result is rounded once.
cudaError_t reduce(Reduce kind, FloatType type, const void* x, void* y, const ReduceShape& shape, int sms,
                   cudaStream_t stream);

// Softmax (or log-softmax) over the middle axis of x seen as (outer, length, inner).
cudaError_t softmax(const float* x, float* y, int64_t outer, int64_t length, int64_t inner, bool log_form, int sms,
                    cudaStream_t stream);

// -log softmax(logits[r])[labels[r]] for `rows` rows of `classes` logits; NaN for a label outside [0, classes).
enum class LabelType { kI64, kI32, kU8 };
cudaError_t sparse_cross_entropy(const float* logits, const void* labels, LabelType label_type, float* loss,
                                 int64_t rows, int64_t classes, int sms, cudaStream_t stream);
// grad_logits[r] = (softmax(logits[r]) - one_hot(labels[r])) * grad_loss[r], the gradient of
// sparse_cross_entropy; a row of NaN for a label outside [0, classes).
cudaError_t sparse_cross_entropy_backward(const float* logits, const void* labels, LabelType label_type,
                                          const float* grad_loss, float* grad_logits, int64_t rows, int64_t classes,
                                          int sms, cudaStream_t stream);

// Every one of `n` elements of `element_size` bytes (1, 2, 4 or 8) set to the low bytes of `pattern`.
cudaError_t fill(void* out, int64_t n, int element_size, uint64_t pattern, int sms, cudaStream_t stream);

// out[r, c] = c == ids[r] ? on : off for `rows` ids and `depth` classes (f32); an id outside [0, depth) gives a row of
// off.
cudaError_t one_hot(const void* ids, LabelType id_type, float* out, int64_t rows, int64_t depth, float on, float off,
                    int sms, cudaStream_t stream);

// y[i] = activation(y[i] + bias[i % channels]) in place over a channels-last 16-bit tensor of n elements
// (bf16 or f16, as the bias), in float, rounded once: fused_conv2d's bias and ReLU after cuDNN's 16-bit
// convolution (src/kernels/cuda/cudnn_convolution.cc).
cudaError_t bias_activation(FloatType type, void* y, const void* bias, int64_t n, int64_t channels, bool relu, int sms,
                            cudaStream_t stream);

// A sliding window over a batch of images (conv2d, max_pool2d): x is (N, in_h, in_w, in_c) and y
// (N, out_h, out_w, out_c), stored NHWC or NCHW; conv2d's filter is (KH, KW, in_c / groups, out_c)
// for NHWC and (out_c, in_c / groups, KH, KW) for NCHW. Tap (ky, kx) of output (oy, ox) reads input
// row oy * stride_h - pad_top + ky * dilation_h (likewise columns); taps outside the image are skipped.
struct WindowShape {
  int64_t batch = 0, in_h = 0, in_w = 0, in_c = 0;
  int64_t out_h = 0, out_w = 0, out_c = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  int64_t groups = 1;
  bool channels_last = true;
};

// y = activation(conv2d(x, filter) + bias): bias may be null; relu or none. Sums in double as the reference.
cudaError_t conv2d(const float* x, const float* filter, const float* bias, bool relu, float* y,
                   const WindowShape& shape, int sms, cudaStream_t stream);
// grad_x from grad_y and the filter.
cudaError_t conv2d_backward_input(const float* grad_y, const float* filter, float* grad_x, const WindowShape& shape,
                                  int sms, cudaStream_t stream);
// grad_filter from grad_y and x.
cudaError_t conv2d_backward_filter(const float* grad_y, const float* x, float* grad_filter, const WindowShape& shape,
                                   cudaStream_t stream);
// Each window's maximum (its first, in row-major window order; padded taps never win).
cudaError_t max_pool2d(const float* x, float* y, const WindowShape& shape, int sms, cudaStream_t stream);
// grad_x: each window's gradient added to its first maximum in x.
cudaError_t max_pool2d_backward(const float* grad_y, const float* x, float* grad_x, const WindowShape& shape, int sms,
                                cudaStream_t stream);

}  // namespace nimbus::cuda::kernels
