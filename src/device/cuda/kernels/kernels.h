// Our CUDA kernels' launchers, compiled by nvcc from src/device/cuda/kernels/*.cu.
// Plain C++17 with the runtime's types only, so nvcc never parses Nimbus's
// C++20 headers; the ops' registrations (src/device/cuda/*_ops.cc) call these.
// Each returns the launch's status (cudaGetLastError) for the caller's check.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace nimbus::cuda::kernels {

inline constexpr int kMaxRank = 8;

// A reduction over the axes marked in `reduced` of a contiguous f32 tensor.
struct ReduceShape {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  bool reduced[kMaxRank] = {};
  int64_t outputs = 0;
  int64_t count = 0;  // elements reduced into each output
};
enum class Reduce { kSum, kMean, kMax };

cudaError_t reduce(Reduce kind, const float* x, float* y, const ReduceShape& shape, int sms, cudaStream_t stream);

// Softmax (or log-softmax) over the middle axis of x seen as (outer, length, inner).
cudaError_t softmax(const float* x, float* y, int64_t outer, int64_t length, int64_t inner, bool log_form, int sms,
                    cudaStream_t stream);

// -log softmax(logits[r])[labels[r]] for `rows` rows of `classes` logits; NaN for a label outside [0, classes).
enum class LabelType { kI64, kI32, kU8 };
cudaError_t sparse_cross_entropy(const float* logits, const void* labels, LabelType label_type, float* loss,
                                 int64_t rows, int64_t classes, int sms, cudaStream_t stream);

// Every one of `n` elements of `element_size` bytes (1, 2, 4 or 8) set to the low bytes of `pattern`.
cudaError_t fill(void* out, int64_t n, int element_size, uint64_t pattern, int sms, cudaStream_t stream);

// out[r, c] = c == ids[r] ? on : off for `rows` ids and `depth` classes (f32); an id outside [0, depth) gives a row of
// off.
cudaError_t one_hot(const void* ids, LabelType id_type, float* out, int64_t rows, int64_t depth, float on, float off,
                    int sms, cudaStream_t stream);

}  // namespace nimbus::cuda::kernels
