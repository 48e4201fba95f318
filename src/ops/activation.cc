// Activations: relu with relu_bias_backward, gelu (tanh and erf forms) with gelu_backward,
// sigmoid, tanh, softplus.
#include <fmt/format.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "nimbus/ops/creation.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/for_kernels/elementwise_defs.h"
#include "src/ops/internal/gelu.h"

namespace nimbus {
namespace {

using internal::kFloatingDTypes;
using internal::register_unary_reference;

InferFn floating_unary_infer() {
  return [](const InferContext& ctx) { return internal::infer_unary_same(ctx, kFloatingDTypes); };
}

const OpSchema& kRelu = define_op({
    .name = "relu",
    .summary = "max(x, 0)",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 1,
    .infer = floating_unary_infer(),
    .gradient =
        [](const GradContext& ctx) {
          // From the output (y > 0 exactly where x > 0), as torch does: the
          // input then has no reader but relu, so graph fusion can fold it into
          // the op that computes it (a matmul's or convolution's post-op). The zeros are scalars that
          // broadcast: no tensor of zeros to fill and read.
          const Tensor& y = ctx.outputs[0];
          const Tensor g = ctx.grad_output(0);
          return std::vector<Tensor>{where(greater(y, scalar_like(y, 0.0)), g, scalar_like(g, 0.0))};
        },
});
// NaN stays NaN (as in torch and TensorFlow): a diverged value must not turn into a zero.
const bool kReluReference =
    register_unary_reference("relu", kFloatingDTypes, [](auto x) { return x < decltype(x)(0) ? decltype(x)(0) : x; });

// relu's gradient and the bias gradient of the layer whose output went through it, in one pass over grad_y
// instead of a select and a sum (the graph's relu-bias gradient fusion makes it: docs/graph.md).
const OpSchema& kReluBiasBackward = define_op({
    .name = "relu_bias_backward",
    .summary = "grad_y where y > 0, else 0: relu's gradient from its output y; and that gradient summed over all "
               "but the last axis (the bias gradient of the layer before the relu)",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 2,
    .infer =
        [](const InferContext& ctx) {
          internal::infer_unary_same(ctx, kFloatingDTypes);
          ctx.expect_same_dtype(0, 1);
          const TensorSpec& grad_y = ctx.inputs[0];
          if (grad_y.shape != ctx.inputs[1].shape || grad_y.shape.rank() < 1) {
            ctx.fail(fmt::format("grad_y is {}, y {}: they must have one shape, of rank 1 or more",
                                 grad_y.shape.to_string(), ctx.inputs[1].shape.to_string()));
          }
          return std::vector<TensorSpec>{grad_y, {Shape{grad_y.shape[grad_y.shape.rank() - 1]}, grad_y.dtype}};
        },
    .differentiable = false,
});

// grad_y, y (rows, C) -> grad_z (rows, C), grad_b (C) summed in f64.
const bool kReluBiasBackwardReference = register_kernel(
    "relu_bias_backward",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(kFloatingDTypes), .fn = [](KernelContext& ctx) {
       const int64_t channels = ctx.outputs[1].numel(), n = ctx.outputs[0].numel();
       std::vector<double> sums(static_cast<size_t>(channels), 0.0);
       visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
         const T* grad_y = static_cast<const T*>(ctx.inputs[0].raw_data());
         const T* y = static_cast<const T*>(ctx.inputs[1].raw_data());
         T* grad_z = static_cast<T*>(ctx.outputs[0].raw_data());
         for (int64_t i = 0; i < n; ++i) {
           const double value = to_double(y[i]) > 0 ? to_double(grad_y[i]) : 0.0;
           grad_z[i] = from_double<T>(value);
           sums[static_cast<size_t>(i % channels)] += value;
         }
         T* grad_b = static_cast<T*>(ctx.outputs[1].raw_data());
         for (int64_t c = 0; c < channels; ++c) grad_b[c] = from_double<T>(sums[static_cast<size_t>(c)]);
       });
     }});

// ---- gelu ----

bool gelu_uses_tanh(const InferContext& ctx) {
  const std::string& approximate = ctx.attrs.get_string("approximate");
  if (approximate != "tanh" && approximate != "none") {
    ctx.fail("approximate is '" + approximate + "'", "use \"tanh\" or \"none\" (the exact erf form)");
  }
  return approximate == "tanh";
}

const OpSchema& kGeluBackward = define_op({
    .name = "gelu_backward",
    .summary = "grad_y * gelu'(x): the gradient of gelu",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 2,
    .infer =
        [](const InferContext& ctx) {
          gelu_uses_tanh(ctx);
          return internal::infer_broadcast_binary(ctx, kFloatingDTypes, true);
        },
    .differentiable = false,
});

const OpSchema& kGelu = define_op({
    .name = "gelu",
    .summary = "x Phi(x), exact (erf) or tanh-approximated",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 1,
    .infer =
        [](const InferContext& ctx) {
          gelu_uses_tanh(ctx);
          return internal::infer_unary_same(ctx, kFloatingDTypes);
        },
    .gradient =
        [](const GradContext& ctx) {
          return std::vector<Tensor>{call_op1(kGeluBackward, {ctx.grad_output(0), ctx.inputs[0]}, ctx.attrs)};
        },
});

const bool kGeluReference = register_kernel(
    "gelu", {.name = kReferenceKernel, .dtypes = internal::dtype_list(kFloatingDTypes), .fn = [](KernelContext& ctx) {
               const bool use_tanh = ctx.attrs.get_string("approximate") == "tanh";
               visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
                 if constexpr (std::is_floating_point_v<internal::compute_t<T>>) {
                   internal::reference_unary<T, T>(ctx.inputs[0], ctx.outputs[0], [&](T x) {
                     const auto v = internal::load(x);
                     return internal::store<T>(use_tanh ? internal::gelu_tanh(v) : internal::gelu_erf(v));
                   });
                 }
               });
             }});

const bool kGeluBackwardReference = register_kernel(
    "gelu_backward",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(kFloatingDTypes), .fn = [](KernelContext& ctx) {
       const bool use_tanh = ctx.attrs.get_string("approximate") == "tanh";
       visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
         if constexpr (std::is_floating_point_v<internal::compute_t<T>>) {
           internal::reference_binary<T, T>(ctx.inputs[0], ctx.inputs[1], ctx.outputs[0], [&](T g, T x) {
             const auto v = internal::load(x);
             const auto d = use_tanh ? internal::gelu_tanh_derivative(v) : internal::gelu_erf_derivative(v);
             return internal::store<T>(internal::load(g) * d);
           });
         }
       });
     }});

// ---- sigmoid, tanh, softplus ----

const OpSchema& kSigmoid = define_op({
    .name = "sigmoid",
    .summary = "1 / (1 + e^-x)",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 1,
    .infer = floating_unary_infer(),
    .gradient =
        [](const GradContext& ctx) {
          const Tensor& y = ctx.outputs[0];
          return std::vector<Tensor>{mul(ctx.grad_output(0), mul(y, sub(ones_like(y), y)))};
        },
});
const bool kSigmoidReference = register_unary_reference("sigmoid", kFloatingDTypes, [](auto x) {
  using C = decltype(x);
  // Stable on both tails: never exponentiates a large positive number.
  return x >= C(0) ? C(1) / (C(1) + std::exp(-x)) : std::exp(x) / (C(1) + std::exp(x));
});

const OpSchema& kTanh = define_op({
    .name = "tanh",
    .summary = "hyperbolic tangent",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 1,
    .infer = floating_unary_infer(),
    .gradient =
        [](const GradContext& ctx) {
          const Tensor& y = ctx.outputs[0];
          return std::vector<Tensor>{mul(ctx.grad_output(0), sub(ones_like(y), square(y)))};
        },
});
const bool kTanhReference = register_unary_reference("tanh", kFloatingDTypes, [](auto x) { return std::tanh(x); });

const OpSchema& kSoftplus = define_op({
    .name = "softplus",
    .summary = "log(1 + e^x), stable",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFloat32,  // exp and log inside
    .num_inputs = 1,
    .infer = floating_unary_infer(),
    .gradient =
        [](const GradContext& ctx) { return std::vector<Tensor>{mul(ctx.grad_output(0), sigmoid(ctx.inputs[0]))}; },
});
const bool kSoftplusReference = register_unary_reference("softplus", kFloatingDTypes, [](auto x) {
  using C = decltype(x);
  // max(x, 0) + log1p(e^-|x|): no overflow for large x, no loss of precision for small.
  return (x > C(0) ? x : C(0)) + std::log1p(std::exp(-std::abs(x)));
});

}  // namespace

Tensor relu(const Tensor& x) { return call_op1(kRelu, {x}); }
Tensor gelu(const Tensor& x, std::string_view approximate) {
  return call_op1(kGelu, {x}, Attrs{{"approximate", std::string(approximate)}});
}
Tensor sigmoid(const Tensor& x) { return call_op1(kSigmoid, {x}); }
Tensor tanh(const Tensor& x) { return call_op1(kTanh, {x}); }
Tensor softplus(const Tensor& x) { return call_op1(kSoftplus, {x}); }

}  // namespace nimbus
