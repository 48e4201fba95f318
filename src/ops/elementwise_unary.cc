// Unary math: neg, exp, log, sqrt, rsqrt, abs, sign, square, sin, cos, erf,
// isfinite, clip.
#include <cmath>
#include <numbers>

#include "nimbus/ops/creation.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/for_kernels/elementwise_defs.h"

namespace nimbus {
namespace {

using internal::kFloatingDTypes;
using internal::register_unary_reference;

constexpr DType kSignedDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kI64};

InferFn unary_on(std::span<const DType> dtypes) {
  return [dtypes](const InferContext& ctx) { return internal::infer_unary_same(ctx, dtypes); };
}

// A floating unary op whose gradient is g * derivative(x, y).
OpSchema floating_unary(const char* name, const char* summary, PrecisionRule precision, bool widen_16_bit,
                        const std::function<Tensor(const Tensor& x, const Tensor& y)>& derivative) {
  return OpSchema{.name = name,
                  .summary = summary,
                  .kind = OpKind::kElementwise,
                  .precision = precision,
                  .widen_16_bit = widen_16_bit,
                  .num_inputs = 1,
                  .infer = unary_on(kFloatingDTypes),
                  .gradient = [derivative](const GradContext& ctx) {
                    return std::vector<Tensor>{mul(ctx.grad_output(0), derivative(ctx.inputs[0], ctx.outputs[0]))};
                  }};
}

const OpSchema& kNeg = define_op({
    .name = "neg",
    .summary = "-x",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 1,
    .infer = unary_on(kSignedDTypes),
    .gradient = [](const GradContext& ctx) { return std::vector<Tensor>{neg(ctx.grad_output(0))}; },
});
const bool kNegReference = register_unary_reference("neg", kSignedDTypes, [](auto x) { return -x; });

const OpSchema& kExp = define_op(floating_unary("exp", "e^x", PrecisionRule::kFloat32, /*widen_16_bit=*/false,
                                                [](const Tensor&, const Tensor& y) { return y; }));
const bool kExpReference = register_unary_reference("exp", kFloatingDTypes, [](auto x) { return std::exp(x); });

const OpSchema& kLog =
    define_op(floating_unary("log", "natural logarithm", PrecisionRule::kFloat32, /*widen_16_bit=*/false,
                             [](const Tensor& x, const Tensor&) { return div(ones_like(x), x); }));
const bool kLogReference = register_unary_reference("log", kFloatingDTypes, [](auto x) { return std::log(x); });

const OpSchema& kSqrt =
    define_op(floating_unary("sqrt", "square root", PrecisionRule::kFollowInputs, /*widen_16_bit=*/true,
                             [](const Tensor&, const Tensor& y) { return div(scalar_like(y, 0.5), y); }));
const bool kSqrtReference = register_unary_reference("sqrt", kFloatingDTypes, [](auto x) { return std::sqrt(x); });

// d/dx x^(-1/2) = -1/2 x^(-3/2) = -1/2 y / x
const OpSchema& kRsqrt =
    define_op(floating_unary("rsqrt", "1 / sqrt(x)", PrecisionRule::kFloat32, /*widen_16_bit=*/false,
                             [](const Tensor& x, const Tensor& y) { return mul(scalar_like(y, -0.5), div(y, x)); }));
const bool kRsqrtReference =
    register_unary_reference("rsqrt", kFloatingDTypes, [](auto x) { return decltype(x)(1) / std::sqrt(x); });

const OpSchema& kAbs = define_op({
    .name = "abs",
    .summary = "|x|",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 1,
    .infer = unary_on(kSignedDTypes),
    .gradient =
        [](const GradContext& ctx) { return std::vector<Tensor>{mul(ctx.grad_output(0), sign(ctx.inputs[0]))}; },
});
const bool kAbsReference = register_unary_reference("abs", kSignedDTypes, [](auto x) { return x < 0 ? -x : x; });

// The derivative of sign is zero wherever it exists.
const OpSchema& kSign = define_op({
    .name = "sign",
    .summary = "-1, 0 or 1 (gradient zero)",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 1,
    .infer = unary_on(kSignedDTypes),
    .gradient = [](const GradContext& ctx) { return std::vector<Tensor>{zeros_like(ctx.inputs[0])}; },
});
const bool kSignReference = register_unary_reference("sign", kSignedDTypes, [](auto x) {
  using C = decltype(x);
  return x > C(0) ? C(1) : (x < C(0) ? C(-1) : C(0));
});

const OpSchema& kSquare = define_op({
    .name = "square",
    .summary = "x * x",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 1,
    .infer = unary_on(kSignedDTypes),
    .gradient =
        [](const GradContext& ctx) {
          return std::vector<Tensor>{mul(ctx.grad_output(0), mul(scalar_like(ctx.inputs[0], 2), ctx.inputs[0]))};
        },
});
const bool kSquareReference = register_unary_reference("square", kSignedDTypes, [](auto x) { return x * x; });

const OpSchema& kSin = define_op(floating_unary("sin", "sine", PrecisionRule::kFollowInputs, /*widen_16_bit=*/false,
                                                [](const Tensor& x, const Tensor&) { return cos(x); }));
const bool kSinReference = register_unary_reference("sin", kFloatingDTypes, [](auto x) { return std::sin(x); });

const OpSchema& kCos = define_op(floating_unary("cos", "cosine", PrecisionRule::kFollowInputs, /*widen_16_bit=*/false,
                                                [](const Tensor& x, const Tensor&) { return neg(sin(x)); }));
const bool kCosReference = register_unary_reference("cos", kFloatingDTypes, [](auto x) { return std::cos(x); });

// d/dx erf(x) = 2/sqrt(pi) e^(-x^2)
const OpSchema& kErf =
    define_op(floating_unary("erf", "the error function", PrecisionRule::kFollowInputs, /*widen_16_bit=*/false,
                             [](const Tensor& x, const Tensor&) {
                               return mul(scalar_like(x, 2.0 / std::sqrt(std::numbers::pi)), exp(neg(square(x))));
                             }));
const bool kErfReference = register_unary_reference("erf", kFloatingDTypes, [](auto x) { return std::erf(x); });

const OpSchema& kIsFinite = define_op({
    .name = "isfinite",
    .summary = "true where x is neither inf nor NaN",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 1,
    .infer =
        [](const InferContext& ctx) {
          ctx.expect_floating(0);
          return std::vector<TensorSpec>{{ctx.inputs[0].shape, DType::kBool}};
        },
    .differentiable = false,
});
const bool kIsFiniteReference = register_kernel(
    "isfinite",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(kFloatingDTypes), .fn = [](KernelContext& ctx) {
       visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
         if constexpr (std::is_floating_point_v<internal::compute_t<T>>) {
           internal::reference_unary<T, bool>(ctx.inputs[0], ctx.outputs[0],
                                              [](T x) { return std::isfinite(internal::load(x)); });
         }
       });
     }});

// ---- clip ----

const OpSchema& kClip = define_op({
    .name = "clip",
    .summary = "min(max(x, low), high)",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 1,
    .infer =
        [](const InferContext& ctx) {
          if (ctx.attrs.get_float("low") > ctx.attrs.get_float("high")) {
            ctx.fail(fmt::format("low {} is above high {}", ctx.attrs.get_float("low"), ctx.attrs.get_float("high")));
          }
          return internal::infer_unary_same(ctx, internal::kNumericDTypes);
        },
    .gradient =
        [](const GradContext& ctx) {
          const Tensor& x = ctx.inputs[0];
          const Tensor inside = logical_and(greater_equal(x, scalar_like(x, ctx.attrs.get_float("low"))),
                                            less_equal(x, scalar_like(x, ctx.attrs.get_float("high"))));
          const Tensor g = ctx.grad_output(0);
          return std::vector<Tensor>{where(inside, g, zeros_like(g))};
        },
});
const bool kClipReference = register_kernel(
    "clip",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(internal::kNumericDTypes), .fn = [](KernelContext& ctx) {
       const double low = ctx.attrs.get_float("low"), high = ctx.attrs.get_float("high");
       visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
         internal::reference_unary<T, T>(ctx.inputs[0], ctx.outputs[0], [&](T x) {
           const double v = to_double(x);
           return from_double<T>(v < low ? low : (v > high ? high : v));
         });
       });
     }});

}  // namespace

Tensor neg(const Tensor& x) { return call_op1(kNeg, {x}); }
Tensor exp(const Tensor& x) { return call_op1(kExp, {x}); }
Tensor log(const Tensor& x) { return call_op1(kLog, {x}); }
Tensor sqrt(const Tensor& x) { return call_op1(kSqrt, {x}); }
Tensor rsqrt(const Tensor& x) { return call_op1(kRsqrt, {x}); }
Tensor abs(const Tensor& x) { return call_op1(kAbs, {x}); }
Tensor sign(const Tensor& x) { return call_op1(kSign, {x}); }
Tensor square(const Tensor& x) { return call_op1(kSquare, {x}); }
Tensor sin(const Tensor& x) { return call_op1(kSin, {x}); }
Tensor cos(const Tensor& x) { return call_op1(kCos, {x}); }
Tensor erf(const Tensor& x) { return call_op1(kErf, {x}); }
Tensor isfinite(const Tensor& x) { return call_op1(kIsFinite, {x}); }
Tensor clip(const Tensor& x, double low, double high) {
  return call_op1(kClip, {x}, Attrs{{"low", low}, {"high", high}});
}

}  // namespace nimbus
