// Vectorized, multithreaded row kernels on f32, one row per softmax axis:
//   softmax, log_softmax          x (..., C) along the last axis (or an axis
//                                 followed only by size-1 axes); other axes go
//                                 to the reference kernel.
//   sparse_softmax_cross_entropy  logits (..., C), labels (...) i32/i64/u8 ->
//                                 loss (...), fused: max, sum of exp and the
//                                 label's logit in two passes over the row.
//   sparse_softmax_cross_entropy_backward  logits, labels, grad_loss (...) ->
//                                 grad_logits (..., C) = (softmax - one_hot) * grad,
//                                 in three passes over the row (max, exp, scale).
// A row is max-subtracted, then exponentiated with vector_math.h's exp (on
// 64-byte vectors where the CPU has AVX-512); its sum runs over 16 lanes in a
// fixed order, so results depend neither on the thread count nor on the
// vector width. The output may alias the input.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "nimbus/base/error.h"
#include "nimbus/ops/for_kernels/reduce_geometry.h"
#include "nimbus/ops/registry.h"
#include "src/kernels/cpu/elementwise_loops.h"
#include "src/kernels/cpu/parallel.h"
#include "src/kernels/cpu/vector_math.h"

namespace nimbus::cpu {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// Row sums run over 16 lanes whatever the vector width (two 8-lane vectors or
// one 16-lane vector per step, then a fixed tree), so a row's result is the
// same bit for bit on AVX2 and AVX-512 paths.
constexpr int64_t kSumLanes = 16;

// The row's maximum, ignoring NaN as the reference's std::max does.
template <typename V>
NIMBUS_ALWAYS_INLINE float row_max(const float* x, int64_t n) {
  constexpr int64_t kLanes = simd::kLanesOf<V>;
  V acc = simd::splat<V>(kMinusInf);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const V v = simd::load<V>(x + i);
    acc = acc < v ? v : acc;
  }
  float result = kMinusInf;
  for (int64_t l = 0; l < kLanes; ++l) result = result < acc[l] ? acc[l] : result;
  for (; i < n; ++i) result = result < x[i] ? x[i] : result;
  return result;
}

// sum(exp(x - max)) over the row, also storing each exp(x - max) to `out` unless it is null.
template <typename V>
NIMBUS_ALWAYS_INLINE float exp_sum(const float* x, float* out, int64_t n, float max) {
  constexpr int64_t kLanes = simd::kLanesOf<V>, kParts = kSumLanes / kLanes;
  V acc[kParts] = {};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    for (int64_t k = 0; k < kParts; ++k) {
      const V e = vmath::exp(simd::load<V>(x + i + k * kLanes) - max);
      if (out != nullptr) simd::store(out + i + k * kLanes, e);
      acc[k] += e;
    }
  }
  if (i < n) {
    // Padding lanes hold -inf, whose exp adds nothing.
    float padded[kSumLanes], exps[kSumLanes];
    for (int64_t l = 0; l < kSumLanes; ++l) padded[l] = i + l < n ? x[i + l] : kMinusInf;
    for (int64_t k = 0; k < kParts; ++k) {
      const V e = vmath::exp(simd::load<V>(padded + k * kLanes) - max);
      simd::store(exps + k * kLanes, e);
      acc[k] += e;
    }
    if (out != nullptr) std::memcpy(out + i, exps, static_cast<size_t>(n - i) * sizeof(float));
  }
  float lanes[kSumLanes];
  for (int64_t k = 0; k < kParts; ++k) simd::store(lanes + k * kLanes, acc[k]);
  for (int64_t width = kSumLanes / 2; width > 0; width /= 2) {
    for (int64_t l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0];
}

// Softmax (or log-softmax) of rows [begin, end) of x (rows, length) into out.
template <typename V>
NIMBUS_ALWAYS_INLINE void softmax_rows(const float* px, float* po, int64_t begin, int64_t end, int64_t length,
                                       bool log_form) {
  for (int64_t r = begin; r < end; ++r) {
    const float* x = px + r * length;
    float* out = po + r * length;
    const float max = row_max<V>(x, length);
    if (log_form) {
      // x - max - log(sum): read x fully before writing, so out may be x.
      const float log_sum = std::log(exp_sum<V>(x, nullptr, length, max));
      map1<V>(
          x, out, length, [&](V v) NIMBUS_LAMBDA_INLINE { return (v - max) - log_sum; }, false);
    } else {
      const float inverse = 1.0f / exp_sum<V>(x, out, length, max);
      map1<V>(
          out, out, length, [&](V v) NIMBUS_LAMBDA_INLINE { return v * inverse; }, false);
    }
  }
}
NIMBUS_TARGET_AVX512 void softmax_rows_avx512(const float* px, float* po, int64_t begin, int64_t end, int64_t length,
                                              bool log_form) {
  softmax_rows<simd::Vec<float, 64>>(px, po, begin, end, length, log_form);
}

// logsumexp(row) - row[label] for rows [begin, end), as log(sum) - (logit - max).
template <typename V, typename Label>
NIMBUS_ALWAYS_INLINE void cross_entropy_rows(const float* logits, const Label* labels, float* out, int64_t begin,
                                             int64_t end, int64_t classes) {
  for (int64_t r = begin; r < end; ++r) {
    const float* row = logits + r * classes;
    const float max = row_max<V>(row, classes);
    const float label_logit = row[static_cast<int64_t>(labels[r])];
    // Computed before the write, so out may alias the logits.
    out[r] = std::log(exp_sum<V>(row, nullptr, classes, max)) - (label_logit - max);
  }
}
template <typename Label>
NIMBUS_TARGET_AVX512 void cross_entropy_rows_avx512(const float* logits, const Label* labels, float* out, int64_t begin,
                                                    int64_t end, int64_t classes) {
  cross_entropy_rows<simd::Vec<float, 64>>(logits, labels, out, begin, end, classes);
}

// The gradient of those rows' losses: (softmax(row) - one_hot(label)) * grad for rows [begin, end).
template <typename V, typename Label>
NIMBUS_ALWAYS_INLINE void cross_entropy_backward_rows(const float* logits, const Label* labels, const float* grad,
                                                      float* out, int64_t begin, int64_t end, int64_t classes) {
  for (int64_t r = begin; r < end; ++r) {
    const float* row = logits + r * classes;
    float* out_row = out + r * classes;
    const int64_t label = static_cast<int64_t>(labels[r]);
    const float inverse = 1.0f / exp_sum<V>(row, out_row, classes, row_max<V>(row, classes));
    const float label_exp = out_row[label], g = grad[r];
    map1<V>(
        out_row, out_row, classes, [&](V v) NIMBUS_LAMBDA_INLINE { return v * inverse * g; }, false);
    out_row[label] = (label_exp * inverse - 1.0f) * g;
  }
}
template <typename Label>
NIMBUS_TARGET_AVX512 void cross_entropy_backward_rows_avx512(const float* logits, const Label* labels,
                                                             const float* grad, float* out, int64_t begin, int64_t end,
                                                             int64_t classes) {
  cross_entropy_backward_rows<simd::Vec<float, 64>>(logits, labels, grad, out, begin, end, classes);
}

// Calls rows_fn(begin, end) on ranges of `rows` rows of `length` elements, split across threads.
template <typename RowsFn>
void for_rows(int64_t rows, int64_t length, RowsFn rows_fn) {
  parallel_for(rows, std::max<int64_t>(1, kMathGrain / std::max<int64_t>(length, 1)), rows_fn);
}

// (rows, length) of a softmax over `axis`, when nothing but size-1 axes follow it.
bool softmax_geometry(const KernelContext& ctx, int64_t* rows, int64_t* length) {
  const Tensor& x = ctx.inputs[0];
  const int axis = normalize_axis(ctx.attrs.get_int("axis"), x.rank(), ctx.op.name.c_str());
  const internal::AxisSplit split(x.shape(), axis);
  *rows = split.outer;
  *length = split.axis;
  return split.inner == 1;
}

void run_softmax(KernelContext& ctx, bool log_form) {
  int64_t rows = 0, length = 0;
  softmax_geometry(ctx, &rows, &length);
  if (rows * length == 0) return;
  const float* px = static_cast<const float*>(ctx.inputs[0].raw_data());
  float* po = static_cast<float*>(ctx.outputs[0].raw_data());
  const bool wide = has_avx512();
  for_rows(rows, length, [&](int64_t begin, int64_t end) {
    if (wide) {
      softmax_rows_avx512(px, po, begin, end, length, log_form);
    } else {
      softmax_rows<simd::Vec<float>>(px, po, begin, end, length, log_form);
    }
  });
}

bool softmax_supported(const KernelContext& ctx) {
  int64_t rows = 0, length = 0;
  return softmax_geometry(ctx, &rows, &length);
}

const bool kSoftmaxRegistered =
    register_kernel("softmax", {.name = "vectorized",
                                .device = DeviceType::kCPU,
                                .dtypes = {DType::kF32},
                                .priority = 50,
                                .fn = [](KernelContext& ctx) { run_softmax(ctx, false); },
                                .supports = softmax_supported}) &&
    register_kernel("log_softmax", {.name = "vectorized",
                                    .device = DeviceType::kCPU,
                                    .dtypes = {DType::kF32},
                                    .priority = 50,
                                    .fn = [](KernelContext& ctx) { run_softmax(ctx, true); },
                                    .supports = softmax_supported});

// ---- sparse_softmax_cross_entropy ----

// Checked before any thread starts: an exception must not leave an OpenMP region.
template <typename Label>
void check_labels(const Label* labels, int64_t rows, int64_t classes) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t label = static_cast<int64_t>(labels[r]);
    if (label < 0 || label >= classes) {
      throw InvalidArgument(fmt::format("sparse_softmax_cross_entropy: label {} of example {} is outside "
                                        "[0, {}) for logits with {} classes",
                                        label, r, classes, classes),
                            "labels are class ids from 0 to num_classes - 1");
    }
  }
}

template <typename Label>
void run_sparse_cross_entropy(KernelContext& ctx) {
  const Tensor& logits = ctx.inputs[0];
  const int64_t classes = logits.dim(-1);
  const int64_t rows = ctx.outputs[0].numel();
  const Label* labels = static_cast<const Label*>(ctx.inputs[1].raw_data());
  check_labels(labels, rows, classes);
  const float* pl = static_cast<const float*>(logits.raw_data());
  float* po = static_cast<float*>(ctx.outputs[0].raw_data());
  const bool wide = has_avx512();
  for_rows(rows, classes, [&](int64_t begin, int64_t end) {
    if (wide) {
      cross_entropy_rows_avx512(pl, labels, po, begin, end, classes);
    } else {
      cross_entropy_rows<simd::Vec<float>>(pl, labels, po, begin, end, classes);
    }
  });
}

// sparse_softmax_cross_entropy_backward (logits, labels, grad_loss) -> grad_logits.
template <typename Label>
void run_sparse_cross_entropy_backward(KernelContext& ctx) {
  const int64_t classes = ctx.inputs[0].dim(-1);
  const int64_t rows = ctx.inputs[2].numel();
  const Label* labels = static_cast<const Label*>(ctx.inputs[1].raw_data());
  check_labels(labels, rows, classes);
  const float* pl = static_cast<const float*>(ctx.inputs[0].raw_data());
  const float* pg = static_cast<const float*>(ctx.inputs[2].raw_data());
  float* po = static_cast<float*>(ctx.outputs[0].raw_data());
  const bool wide = has_avx512();
  for_rows(rows, classes, [&](int64_t begin, int64_t end) {
    if (wide) {
      cross_entropy_backward_rows_avx512(pl, labels, pg, po, begin, end, classes);
    } else {
      cross_entropy_backward_rows<simd::Vec<float>>(pl, labels, pg, po, begin, end, classes);
    }
  });
}

// Runs run.template operator()<Label>() with the labels' element type.
template <typename Run>
void with_label_type(DType dtype, Run&& run) {
  switch (dtype) {
    case DType::kI32: return run.template operator()<int32_t>();
    case DType::kI64: return run.template operator()<int64_t>();
    case DType::kU8: return run.template operator()<uint8_t>();
    default: NIMBUS_ASSERT(false) << "label dtype " << dtype_name(dtype);
  }
}

const bool kCrossEntropyRegistered =
    register_kernel("sparse_softmax_cross_entropy",
                    {.name = "vectorized",
                     .device = DeviceType::kCPU,
                     .dtypes = {DType::kF32},
                     .priority = 50,
                     .fn =
                         [](KernelContext& ctx) {
                           with_label_type(ctx.inputs[1].dtype(),
                                           [&]<typename Label>() { run_sparse_cross_entropy<Label>(ctx); });
                         }}) &&
    register_kernel("sparse_softmax_cross_entropy_backward",
                    {.name = "vectorized",
                     .device = DeviceType::kCPU,
                     .dtypes = {DType::kF32},
                     .priority = 50,
                     .fn = [](KernelContext& ctx) {
                       with_label_type(ctx.inputs[1].dtype(),
                                       [&]<typename Label>() { run_sparse_cross_entropy_backward<Label>(ctx); });
                     }});

}  // namespace
}  // namespace nimbus::cpu
