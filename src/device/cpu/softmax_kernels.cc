// Vectorized, multithreaded row kernels on f32, one row per softmax axis:
//   softmax, log_softmax          x (..., C) along the last axis (or an axis
//                                 followed only by size-1 axes); other axes go
//                                 to the reference kernel.
//   sparse_softmax_cross_entropy  logits (..., C), labels (...) i32/i64/u8 ->
//                                 loss (...), fused: max, sum of exp and the
//                                 label's logit in two passes over the row.
// A row is max-subtracted, then exponentiated with vector_math.h's exp; its
// sum runs over vector lanes in a fixed order, so results do not depend on
// the thread count. The output may alias the input.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "nimbus/base/error.h"
#include "nimbus/ops/registry.h"
#include "src/device/cpu/elementwise_loops.h"
#include "src/device/cpu/parallel.h"
#include "src/device/cpu/vector_math.h"
#include "src/ops/internal/reduce_geometry.h"

namespace nimbus::cpu {
namespace {

using simd::f32x8;
constexpr int64_t kLanes = simd::kLanes<float>;
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// Sums a vector's lanes in a fixed tree.
float lane_sum(f32x8 v) {
  for (int64_t width = kLanes / 2; width > 0; width /= 2) {
    for (int64_t l = 0; l < width; ++l) v[l] += v[l + width];
  }
  return v[0];
}

// The row's maximum, ignoring NaN as the reference's std::max does.
float row_max(const float* x, int64_t n) {
  f32x8 acc = simd::splat(kMinusInf);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const f32x8 v = simd::load(x + i);
    acc = acc < v ? v : acc;
  }
  float result = kMinusInf;
  for (int64_t l = 0; l < kLanes; ++l) result = result < acc[l] ? acc[l] : result;
  for (; i < n; ++i) result = result < x[i] ? x[i] : result;
  return result;
}

// sum(exp(x - max)) over the row, also storing each exp(x - max) to `out` unless it is null.
float exp_sum(const float* x, float* out, int64_t n, float max) {
  f32x8 acc_0 = simd::splat(0.0f), acc_1 = simd::splat(0.0f);
  int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const f32x8 e_0 = vmath::exp(simd::load(x + i) - max);
    const f32x8 e_1 = vmath::exp(simd::load(x + i + kLanes) - max);
    if (out != nullptr) {
      simd::store(out + i, e_0);
      simd::store(out + i + kLanes, e_1);
    }
    acc_0 += e_0;
    acc_1 += e_1;
  }
  for (; i < n; i += kLanes) {
    const int64_t count = std::min(kLanes, n - i);
    // Padding lanes hold -inf, whose exp adds nothing.
    float padded[kLanes];
    for (int64_t l = 0; l < kLanes; ++l) padded[l] = l < count ? x[i + l] : kMinusInf;
    const f32x8 e = vmath::exp(simd::load(padded) - max);
    if (out != nullptr) store_partial(out + i, e, count);
    acc_0 += e;
  }
  return lane_sum(acc_0 + acc_1);
}

// Calls row_fn(row) for each of `rows` rows of `length` elements, rows split across threads.
template <typename RowFn>
void for_rows(int64_t rows, int64_t length, RowFn row_fn) {
  parallel_for(rows, std::max<int64_t>(1, kMathGrain / std::max<int64_t>(length, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) row_fn(r);
  });
}

// (rows, length) of a softmax over `axis`, when nothing but size-1 axes follow it.
bool softmax_rows(const KernelContext& ctx, int64_t* rows, int64_t* length) {
  const Tensor& x = ctx.inputs[0];
  const int axis = normalize_axis(ctx.attrs.get_int("axis"), x.rank(), ctx.op.name.c_str());
  const internal::AxisSplit split(x.shape(), axis);
  *rows = split.outer;
  *length = split.axis;
  return split.inner == 1;
}

void run_softmax(KernelContext& ctx, bool log_form) {
  int64_t rows = 0, length = 0;
  softmax_rows(ctx, &rows, &length);
  if (rows * length == 0) return;
  const float* px = static_cast<const float*>(ctx.inputs[0].raw_data());
  float* po = static_cast<float*>(ctx.outputs[0].raw_data());
  for_rows(rows, length, [&](int64_t r) {
    const float* x = px + r * length;
    float* out = po + r * length;
    const float max = row_max(x, length);
    if (log_form) {
      // x - max - log(sum): read x fully before writing, so out may be x.
      const float log_sum = std::log(exp_sum(x, nullptr, length, max));
      map1(
          x, out, length, [&](f32x8 v) { return (v - max) - log_sum; }, false);
    } else {
      const float inverse = 1.0f / exp_sum(x, out, length, max);
      map1(
          out, out, length, [&](f32x8 v) { return v * inverse; }, false);
    }
  });
}

bool softmax_supported(const KernelContext& ctx) {
  int64_t rows = 0, length = 0;
  return softmax_rows(ctx, &rows, &length);
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

template <typename Label>
void run_sparse_cross_entropy(KernelContext& ctx) {
  const Tensor& logits = ctx.inputs[0];
  const int64_t classes = logits.dim(-1);
  const int64_t rows = ctx.outputs[0].numel();
  const Label* labels = static_cast<const Label*>(ctx.inputs[1].raw_data());
  // Checked before any thread starts: an exception must not leave an OpenMP region.
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t label = static_cast<int64_t>(labels[r]);
    if (label < 0 || label >= classes) {
      throw InvalidArgument(fmt::format("sparse_softmax_cross_entropy: label {} of example {} is outside "
                                        "[0, {}) for logits with {} classes",
                                        label, r, classes, classes),
                            "labels are class ids from 0 to num_classes - 1");
    }
  }
  const float* pl = static_cast<const float*>(logits.raw_data());
  float* po = static_cast<float*>(ctx.outputs[0].raw_data());
  for_rows(rows, classes, [&](int64_t r) {
    const float* row = pl + r * classes;
    const float max = row_max(row, classes);
    const float label_logit = row[static_cast<int64_t>(labels[r])];
    // logsumexp - logit = log(sum) - (logit - max), computed before the write (out may alias).
    po[r] = std::log(exp_sum(row, nullptr, classes, max)) - (label_logit - max);
  });
}

const bool kCrossEntropyRegistered = register_kernel(
    "sparse_softmax_cross_entropy", {.name = "vectorized",
                                     .device = DeviceType::kCPU,
                                     .dtypes = {DType::kF32},
                                     .priority = 50,
                                     .fn = [](KernelContext& ctx) {
                                       switch (ctx.inputs[1].dtype()) {
                                         case DType::kI32: return run_sparse_cross_entropy<int32_t>(ctx);
                                         case DType::kI64: return run_sparse_cross_entropy<int64_t>(ctx);
                                         case DType::kU8: return run_sparse_cross_entropy<uint8_t>(ctx);
                                         default:
                                           NIMBUS_ASSERT(false) << "label dtype " << dtype_name(ctx.inputs[1].dtype());
                                       }
                                     }});

}  // namespace
}  // namespace nimbus::cpu
