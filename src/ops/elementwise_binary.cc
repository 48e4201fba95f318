// Binary arithmetic with broadcasting: add, sub, mul, div, pow, maximum, minimum.
#include <cmath>

#include "nimbus/ops/creation.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/for_kernels/elementwise_defs.h"
#include "nimbus/ops/reduction.h"

namespace nimbus {
namespace {

using internal::infer_broadcast_binary;
using internal::kFloatingDTypes;
using internal::kNumericDTypes;
using internal::register_binary_reference;

InferFn numeric_binary() {
  return [](const InferContext& ctx) { return infer_broadcast_binary(ctx, kNumericDTypes, true); };
}
InferFn floating_binary() {
  return [](const InferContext& ctx) { return infer_broadcast_binary(ctx, kFloatingDTypes, true); };
}

// Gradients of broadcast inputs sum over the broadcast axes.
Tensor unbroadcast(const GradContext& ctx, int input, const Tensor& grad) {
  return ctx.needs(input) ? reduce_to_shape(grad, ctx.inputs[input].shape()) : Tensor();
}

// ---- add ----

const OpSchema& kAdd = define_op({
    .name = "add",
    .summary = "a + b",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 2,
    .infer = numeric_binary(),
    .gradient =
        [](const GradContext& ctx) {
          const Tensor g = ctx.grad_output(0);
          return std::vector<Tensor>{unbroadcast(ctx, 0, g), unbroadcast(ctx, 1, g)};
        },
});
const bool kAddReference = register_binary_reference("add", kNumericDTypes, [](auto a, auto b) { return a + b; });

// ---- sub ----

const OpSchema& kSub = define_op({
    .name = "sub",
    .summary = "a - b",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 2,
    .infer = numeric_binary(),
    .gradient =
        [](const GradContext& ctx) {
          const Tensor g = ctx.grad_output(0);
          return std::vector<Tensor>{unbroadcast(ctx, 0, g), ctx.needs(1) ? unbroadcast(ctx, 1, neg(g)) : Tensor()};
        },
});
const bool kSubReference = register_binary_reference("sub", kNumericDTypes, [](auto a, auto b) { return a - b; });

// ---- mul ----

const OpSchema& kMul = define_op({
    .name = "mul",
    .summary = "a * b",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 2,
    .infer = numeric_binary(),
    .gradient =
        [](const GradContext& ctx) {
          const Tensor g = ctx.grad_output(0);
          return std::vector<Tensor>{ctx.needs(0) ? unbroadcast(ctx, 0, mul(g, ctx.inputs[1])) : Tensor(),
                                     ctx.needs(1) ? unbroadcast(ctx, 1, mul(g, ctx.inputs[0])) : Tensor()};
        },
});
const bool kMulReference = register_binary_reference("mul", kNumericDTypes, [](auto a, auto b) { return a * b; });

// ---- div ----

const OpSchema& kDiv = define_op({
    .name = "div",
    .summary = "a / b (floating)",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 2,
    .infer = floating_binary(),
    .gradient =
        [](const GradContext& ctx) {
          const Tensor g = ctx.grad_output(0);
          const Tensor& b = ctx.inputs[1];
          // d(a/b)/db = -a / b^2 = -(a/b) / b
          return std::vector<Tensor>{
              ctx.needs(0) ? unbroadcast(ctx, 0, div(g, b)) : Tensor(),
              ctx.needs(1) ? unbroadcast(ctx, 1, neg(div(mul(g, ctx.outputs[0]), b))) : Tensor()};
        },
});
const bool kDivReference = register_binary_reference("div", kFloatingDTypes, [](auto a, auto b) { return a / b; });

// ---- pow ----

const OpSchema& kPow = define_op({
    .name = "pow",
    .summary = "a ** b (floating)",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFloat32,
    .num_inputs = 2,
    .infer = floating_binary(),
    .gradient =
        [](const GradContext& ctx) {
          const Tensor g = ctx.grad_output(0);
          const Tensor& a = ctx.inputs[0];
          const Tensor& b = ctx.inputs[1];
          Tensor grad_a, grad_b;
          // d/da = b a^(b-1); d/db = a^b log(a), taken as 0 where a <= 0 (as TensorFlow does).
          if (ctx.needs(0)) grad_a = unbroadcast(ctx, 0, mul(g, mul(b, pow(a, sub(b, ones_like(b))))));
          if (ctx.needs(1)) {
            const Tensor zero = zeros_like(a);
            const Tensor positive = greater(a, zero);
            const Tensor safe_log = where(positive, log(where(positive, a, ones_like(a))), zero);
            grad_b = unbroadcast(ctx, 1, mul(g, mul(ctx.outputs[0], safe_log)));
          }
          return std::vector<Tensor>{grad_a, grad_b};
        },
});
const bool kPowReference =
    register_binary_reference("pow", kFloatingDTypes, [](auto a, auto b) { return std::pow(a, b); });

// ---- maximum, minimum ----
// Ties send the gradient to `a`, as TensorFlow does. A NaN in either input
// gives NaN (as in torch and TensorFlow), whichever side it is on.

const OpSchema& kMaximum = define_op({
    .name = "maximum",
    .summary = "elementwise max(a, b)",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 2,
    .infer = numeric_binary(),
    .gradient =
        [](const GradContext& ctx) {
          const Tensor g = ctx.grad_output(0);
          const Tensor a_wins = greater_equal(ctx.inputs[0], ctx.inputs[1]);
          const Tensor zero = zeros_like(g);
          return std::vector<Tensor>{ctx.needs(0) ? unbroadcast(ctx, 0, where(a_wins, g, zero)) : Tensor(),
                                     ctx.needs(1) ? unbroadcast(ctx, 1, where(a_wins, zero, g)) : Tensor()};
        },
});
const bool kMaximumReference =
    register_binary_reference("maximum", kNumericDTypes, [](auto a, auto b) { return a >= b || a != a ? a : b; });

const OpSchema& kMinimum = define_op({
    .name = "minimum",
    .summary = "elementwise min(a, b)",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 2,
    .infer = numeric_binary(),
    .gradient =
        [](const GradContext& ctx) {
          const Tensor g = ctx.grad_output(0);
          const Tensor a_wins = less_equal(ctx.inputs[0], ctx.inputs[1]);
          const Tensor zero = zeros_like(g);
          return std::vector<Tensor>{ctx.needs(0) ? unbroadcast(ctx, 0, where(a_wins, g, zero)) : Tensor(),
                                     ctx.needs(1) ? unbroadcast(ctx, 1, where(a_wins, zero, g)) : Tensor()};
        },
});
const bool kMinimumReference =
    register_binary_reference("minimum", kNumericDTypes, [](auto a, auto b) { return a <= b || a != a ? a : b; });

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return call_op1(kAdd, {a, b}); }
Tensor sub(const Tensor& a, const Tensor& b) { return call_op1(kSub, {a, b}); }
Tensor mul(const Tensor& a, const Tensor& b) { return call_op1(kMul, {a, b}); }
Tensor div(const Tensor& a, const Tensor& b) { return call_op1(kDiv, {a, b}); }
Tensor pow(const Tensor& a, const Tensor& b) { return call_op1(kPow, {a, b}); }
Tensor maximum(const Tensor& a, const Tensor& b) { return call_op1(kMaximum, {a, b}); }
Tensor minimum(const Tensor& a, const Tensor& b) { return call_op1(kMinimum, {a, b}); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, double b) { return add(a, scalar_like(a, b)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, scalar_like(a, b)); }
Tensor operator*(const Tensor& a, double b) { return mul(a, scalar_like(a, b)); }
Tensor operator/(const Tensor& a, double b) { return div(a, scalar_like(a, b)); }
Tensor operator+(double a, const Tensor& b) { return add(scalar_like(b, a), b); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar_like(b, a), b); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar_like(b, a), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_like(b, a), b); }

}  // namespace nimbus
