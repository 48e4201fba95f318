// Reductions over any axes: sum, mean, reduce_max, reduce_min, variance,
// argmax; and softmax / log_softmax along one axis.
#include "nimbus/ops/reduction.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "nimbus/ops/creation.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/for_kernels/elementwise_defs.h"
#include "nimbus/ops/for_kernels/reduce_geometry.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus {
namespace {

using internal::kFloatingDTypes;
using internal::kNumericDTypes;
using internal::ReduceGeometry;

std::vector<TensorSpec> infer_reduce(const InferContext& ctx, std::span<const DType> allowed) {
  internal::infer_unary_same(ctx, allowed);
  const ReduceGeometry geometry(ctx.inputs[0].shape, ctx.attrs.get_ints("axes"), ctx.op.name.c_str());
  return {{ctx.attrs.get_bool("keepdims") ? geometry.kept_shape : geometry.reduced_shape, ctx.inputs[0].dtype}};
}

// The output gradient reshaped to keep the reduced axes as size 1, then broadcast to x.
Tensor broadcast_back(const GradContext& ctx, const Tensor& value) {
  const ReduceGeometry geometry(ctx.inputs[0].shape(), ctx.attrs.get_ints("axes"), ctx.op.name.c_str());
  return broadcast_to(reshape(value, geometry.kept_shape), ctx.inputs[0].shape());
}

// Reference reduction: accumulates every input element into its output slot in
// input order (a fixed order, so results are reproducible), in double.
template <typename Init, typename Accumulate, typename Finish>
void reference_reduce(KernelContext& ctx, Init init, Accumulate accumulate, Finish finish) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const ReduceGeometry geometry(x.shape(), ctx.attrs.get_ints("axes"), ctx.op.name.c_str());
  const auto out_strides = internal::broadcast_strides(geometry.kept_shape, x.shape());
  std::vector<double> acc(static_cast<size_t>(out.numel()), init);
  visit_dtype(x.dtype(), [&]<typename T>() {
    const T* px = static_cast<const T*>(x.raw_data());
    for (int64_t i = 0; i < x.numel(); ++i) {
      double& slot = acc[static_cast<size_t>(internal::broadcast_offset(i, x.shape(), out_strides))];
      slot = accumulate(slot, to_double(px[i]));
    }
    T* po = static_cast<T*>(out.raw_data());
    for (int64_t j = 0; j < out.numel(); ++j) {
      po[j] = from_double<T>(finish(acc[static_cast<size_t>(j)], geometry.count));
    }
  });
}

Attrs reduce_attrs(const std::vector<int64_t>& axes, bool keepdims) {
  return Attrs{{"axes", axes}, {"keepdims", keepdims}};
}

// ---- sum, mean ----

const OpSchema& kSum = define_op({
    .name = "sum",
    .summary = "sum over axes",
    .kind = OpKind::kReduction,
    .precision = PrecisionRule::kFloat32,
    .widen_16_bit = true,
    .num_inputs = 1,
    .infer = [](const InferContext& ctx) { return infer_reduce(ctx, kNumericDTypes); },
    .gradient = [](const GradContext& ctx) { return std::vector<Tensor>{broadcast_back(ctx, ctx.grad_output(0))}; },
});
const bool kSumReference = register_kernel(
    "sum", {.name = kReferenceKernel, .dtypes = internal::dtype_list(kNumericDTypes), .fn = [](KernelContext& ctx) {
              reference_reduce(
                  ctx, 0.0, [](double a, double v) { return a + v; }, [](double a, int64_t) { return a; });
            }});

const OpSchema& kMean = define_op({
    .name = "mean",
    .summary = "mean over axes",
    .kind = OpKind::kReduction,
    .precision = PrecisionRule::kFloat32,
    .widen_16_bit = true,
    .num_inputs = 1,
    .infer = [](const InferContext& ctx) { return infer_reduce(ctx, kFloatingDTypes); },
    .gradient =
        [](const GradContext& ctx) {
          const ReduceGeometry geometry(ctx.inputs[0].shape(), ctx.attrs.get_ints("axes"), "mean");
          const Tensor g = ctx.grad_output(0);
          return std::vector<Tensor>{broadcast_back(ctx, div(g, scalar_like(g, static_cast<double>(geometry.count))))};
        },
});
const bool kMeanReference = register_kernel(
    "mean", {.name = kReferenceKernel, .dtypes = internal::dtype_list(kFloatingDTypes), .fn = [](KernelContext& ctx) {
               reference_reduce(
                   ctx, 0.0, [](double a, double v) { return a + v; },
                   [](double a, int64_t n) { return a / static_cast<double>(n); });
             }});

// ---- reduce_max, reduce_min ----
// The gradient is shared equally among the elements that attain the extreme.

std::vector<Tensor> extreme_gradient(const GradContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const Tensor attained = cast(equal(x, broadcast_back(ctx, ctx.outputs[0])), x.dtype());
  const Tensor count = sum(attained, ctx.attrs.get_ints("axes"), true);
  return {mul(broadcast_back(ctx, ctx.grad_output(0)), div(attained, broadcast_to(count, x.shape())))};
}

void check_not_empty(const InferContext& ctx) {
  if (ctx.inputs[0].shape.numel() == 0) ctx.fail("cannot reduce an empty tensor " + ctx.inputs[0].shape.to_string());
}

const OpSchema& kReduceMax = define_op({
    .name = "reduce_max",
    .summary = "maximum over axes",
    .kind = OpKind::kReduction,
    .precision = PrecisionRule::kFollowInputs,  // picks an element: exact in any dtype
    .widen_16_bit = true,
    .num_inputs = 1,
    .infer =
        [](const InferContext& ctx) {
          check_not_empty(ctx);
          return infer_reduce(ctx, kNumericDTypes);
        },
    .gradient = extreme_gradient,
});
const bool kReduceMaxReference = register_kernel(
    "reduce_max",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(kNumericDTypes), .fn = [](KernelContext& ctx) {
       reference_reduce(
           ctx, -std::numeric_limits<double>::infinity(),
           [](double a, double v) { return std::isnan(v) || v > a ? v : a; }, [](double a, int64_t) { return a; });
     }});

const OpSchema& kReduceMin = define_op({
    .name = "reduce_min",
    .summary = "minimum over axes",
    .kind = OpKind::kReduction,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 1,
    .infer =
        [](const InferContext& ctx) {
          check_not_empty(ctx);
          return infer_reduce(ctx, kNumericDTypes);
        },
    .gradient = extreme_gradient,
});
const bool kReduceMinReference = register_kernel(
    "reduce_min",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(kNumericDTypes), .fn = [](KernelContext& ctx) {
       reference_reduce(
           ctx, std::numeric_limits<double>::infinity(),
           [](double a, double v) { return std::isnan(v) || v < a ? v : a; }, [](double a, int64_t) { return a; });
     }});

// ---- variance ----

const OpSchema& kVariance = define_op({
    .name = "variance",
    .summary = "population variance over axes (divides by N)",
    .kind = OpKind::kReduction,
    .precision = PrecisionRule::kFloat32,
    .num_inputs = 1,
    .infer = [](const InferContext& ctx) { return infer_reduce(ctx, kFloatingDTypes); },
    .gradient =
        [](const GradContext& ctx) {
          // d var / dx = 2 (x - mean) / N
          const Tensor& x = ctx.inputs[0];
          const std::vector<int64_t>& axes = ctx.attrs.get_ints("axes");
          const ReduceGeometry geometry(x.shape(), axes, "variance");
          const Tensor centered = sub(x, broadcast_to(mean(x, axes, true), x.shape()));
          const Tensor scale = scalar_like(x, 2.0 / static_cast<double>(geometry.count));
          return std::vector<Tensor>{mul(broadcast_back(ctx, ctx.grad_output(0)), mul(centered, scale))};
        },
});
const bool kVarianceReference = register_kernel(
    "variance",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(kFloatingDTypes), .fn = [](KernelContext& ctx) {
       // Two passes over plain loops: the mean, then the mean squared deviation.
       const Tensor& x = ctx.inputs[0];
       const ReduceGeometry geometry(x.shape(), ctx.attrs.get_ints("axes"), "variance");
       const auto out_strides = internal::broadcast_strides(geometry.kept_shape, x.shape());
       const size_t n_out = static_cast<size_t>(ctx.outputs[0].numel());
       std::vector<double> sums(n_out, 0.0), squares(n_out, 0.0);
       visit_dtype(x.dtype(), [&]<typename T>() {
         const T* px = static_cast<const T*>(x.raw_data());
         for (int64_t i = 0; i < x.numel(); ++i) {
           sums[static_cast<size_t>(internal::broadcast_offset(i, x.shape(), out_strides))] += to_double(px[i]);
         }
         for (int64_t i = 0; i < x.numel(); ++i) {
           const size_t j = static_cast<size_t>(internal::broadcast_offset(i, x.shape(), out_strides));
           const double d = to_double(px[i]) - sums[j] / static_cast<double>(geometry.count);
           squares[j] += d * d;
         }
         T* po = static_cast<T*>(ctx.outputs[0].raw_data());
         for (size_t j = 0; j < n_out; ++j) po[j] = from_double<T>(squares[j] / static_cast<double>(geometry.count));
       });
     }});

// ---- argmax ----

const OpSchema& kArgmax = define_op({
    .name = "argmax",
    .summary = "index of the first maximum along an axis (i64)",
    .kind = OpKind::kReduction,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 1,
    .infer =
        [](const InferContext& ctx) {
          check_not_empty(ctx);
          internal::infer_unary_same(ctx, kNumericDTypes);
          const int64_t axis[] = {ctx.attrs.get_int("axis")};
          const ReduceGeometry geometry(ctx.inputs[0].shape, axis, "argmax");
          return std::vector<TensorSpec>{
              {ctx.attrs.get_bool("keepdims") ? geometry.kept_shape : geometry.reduced_shape, DType::kI64}};
        },
    .differentiable = false,
});
const bool kArgmaxReference = register_kernel(
    "argmax", {.name = kReferenceKernel, .dtypes = internal::dtype_list(kNumericDTypes), .fn = [](KernelContext& ctx) {
                 const Tensor& x = ctx.inputs[0];
                 const int axis = normalize_axis(ctx.attrs.get_int("axis"), x.rank(), "argmax");
                 const internal::AxisSplit split(x.shape(), axis);
                 int64_t* po = static_cast<int64_t*>(ctx.outputs[0].raw_data());
                 visit_dtype(x.dtype(), [&]<typename T>() {
                   const T* px = static_cast<const T*>(x.raw_data());
                   for (int64_t o = 0; o < split.outer; ++o) {
                     for (int64_t in = 0; in < split.inner; ++in) {
                       int64_t best = 0;
                       double best_value = to_double(px[o * split.axis * split.inner + in]);
                       for (int64_t k = 1; k < split.axis; ++k) {
                         const double v = to_double(px[(o * split.axis + k) * split.inner + in]);
                         if (v > best_value || (std::isnan(v) && !std::isnan(best_value))) {
                           best = k;
                           best_value = v;
                         }
                       }
                       po[o * split.inner + in] = best;
                     }
                   }
                 });
               }});

// ---- softmax, log_softmax ----

std::vector<TensorSpec> infer_softmax(const InferContext& ctx) {
  if (ctx.inputs[0].shape.rank() == 0) ctx.fail("needs a tensor of rank 1 or more, got a scalar");
  normalize_axis(ctx.attrs.get_int("axis"), ctx.inputs[0].shape.rank(), ctx.op.name.c_str());
  return internal::infer_unary_same(ctx, kFloatingDTypes);
}

// Softmax along one axis, max-subtracted, computed in double.
void reference_softmax(KernelContext& ctx, bool log_form) {
  const Tensor& x = ctx.inputs[0];
  const int axis = normalize_axis(ctx.attrs.get_int("axis"), x.rank(), ctx.op.name.c_str());
  const internal::AxisSplit split(x.shape(), axis);
  visit_dtype(x.dtype(), [&]<typename T>() {
    const T* px = static_cast<const T*>(x.raw_data());
    T* po = static_cast<T*>(ctx.outputs[0].raw_data());
    for (int64_t o = 0; o < split.outer; ++o) {
      for (int64_t in = 0; in < split.inner; ++in) {
        auto at = [&](int64_t k) { return (o * split.axis + k) * split.inner + in; };
        double max_value = -std::numeric_limits<double>::infinity();
        for (int64_t k = 0; k < split.axis; ++k) max_value = std::max(max_value, to_double(px[at(k)]));
        double total = 0;
        for (int64_t k = 0; k < split.axis; ++k) total += std::exp(to_double(px[at(k)]) - max_value);
        for (int64_t k = 0; k < split.axis; ++k) {
          const double shifted = to_double(px[at(k)]) - max_value;
          po[at(k)] = from_double<T>(log_form ? shifted - std::log(total) : std::exp(shifted) / total);
        }
      }
    }
  });
}

const OpSchema& kSoftmax = define_op({
    .name = "softmax",
    .summary = "exp(x) / sum(exp(x)) along an axis, max-subtracted",
    .kind = OpKind::kReduction,
    .precision = PrecisionRule::kFloat32,
    .num_inputs = 1,
    .infer = infer_softmax,
    .gradient =
        [](const GradContext& ctx) {
          // dx = y (g - sum(g y, axis))
          const Tensor& y = ctx.outputs[0];
          const Tensor g = ctx.grad_output(0);
          const int64_t axis = ctx.attrs.get_int("axis");
          return std::vector<Tensor>{mul(y, sub(g, sum(mul(g, y), {axis}, true)))};
        },
});
const bool kSoftmaxReference =
    register_kernel("softmax", {.name = kReferenceKernel,
                                .dtypes = internal::dtype_list(kFloatingDTypes),
                                .fn = [](KernelContext& ctx) { reference_softmax(ctx, false); }});

const OpSchema& kLogSoftmax = define_op({
    .name = "log_softmax",
    .summary = "x - logsumexp(x) along an axis",
    .kind = OpKind::kReduction,
    .precision = PrecisionRule::kFloat32,
    .num_inputs = 1,
    .infer = infer_softmax,
    .gradient =
        [](const GradContext& ctx) {
          // dx = g - exp(y) sum(g, axis)
          const Tensor& y = ctx.outputs[0];
          const Tensor g = ctx.grad_output(0);
          const int64_t axis = ctx.attrs.get_int("axis");
          return std::vector<Tensor>{sub(g, mul(exp(y), sum(g, {axis}, true)))};
        },
});
const bool kLogSoftmaxReference =
    register_kernel("log_softmax", {.name = kReferenceKernel,
                                    .dtypes = internal::dtype_list(kFloatingDTypes),
                                    .fn = [](KernelContext& ctx) { reference_softmax(ctx, true); }});

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return call_op1(kSum, {x}, reduce_attrs(axes, keepdims));
}
Tensor mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return call_op1(kMean, {x}, reduce_attrs(axes, keepdims));
}
Tensor reduce_max(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return call_op1(kReduceMax, {x}, reduce_attrs(axes, keepdims));
}
Tensor reduce_min(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return call_op1(kReduceMin, {x}, reduce_attrs(axes, keepdims));
}
Tensor variance(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return call_op1(kVariance, {x}, reduce_attrs(axes, keepdims));
}
Tensor argmax(const Tensor& x, int64_t axis, bool keepdims) {
  return call_op1(kArgmax, {x}, Attrs{{"axis", axis}, {"keepdims", keepdims}});
}
Tensor softmax(const Tensor& x, int64_t axis) { return call_op1(kSoftmax, {x}, Attrs{{"axis", axis}}); }
Tensor log_softmax(const Tensor& x, int64_t axis) { return call_op1(kLogSoftmax, {x}, Attrs{{"axis", axis}}); }

Tensor reduce_to_shape(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  const Shape& from = grad.shape();
  if (from.rank() < shape.rank()) {
    throw InvalidArgument(
        fmt::format("reduce_to_shape: {} cannot reduce to the larger rank of {}", from.to_string(), shape.to_string()));
  }
  // Axes that broadcasting added (leading) or stretched (size 1 in `shape`).
  std::vector<int64_t> axes;
  const int added = from.rank() - shape.rank();
  for (int axis = 0; axis < from.rank(); ++axis) {
    if (axis < added || (shape.dims()[axis - added] == 1 && from.dims()[axis] != 1)) axes.push_back(axis);
  }
  const Tensor summed = axes.empty() ? grad : sum(grad, axes, true);
  return reshape(summed, shape);
}

}  // namespace nimbus
