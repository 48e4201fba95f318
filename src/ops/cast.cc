// cast (dtype conversion) and stop_gradient (identity without a gradient).
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/for_kernels/copy.h"
#include "nimbus/ops/for_kernels/elementwise_defs.h"

namespace nimbus {
namespace {

const OpSchema& kCast = define_op({
    .name = "cast",
    .summary = "convert to another dtype (round to nearest even; integers truncate)",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kKeepInputs,  // its dtype attribute is the point
    .num_inputs = 1,
    .infer =
        [](const InferContext& ctx) {
          return std::vector<TensorSpec>{{ctx.inputs[0].shape, ctx.attrs.get_dtype("dtype")}};
        },
    .gradient =
        [](const GradContext& ctx) {
          // Only floating -> floating casts pass a gradient (the tape asks for floating inputs only).
          const Tensor g = ctx.grad_output(0);
          if (!is_floating(g.dtype())) return std::vector<Tensor>{Tensor()};
          return std::vector<Tensor>{cast(g, ctx.inputs[0].dtype())};
        },
});

const bool kCastReference = register_kernel(
    "cast",
    {.name = kReferenceKernel, .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)}, .fn = [](KernelContext& ctx) {
       visit_dtype(ctx.inputs[0].dtype(), [&]<typename In>() {
         visit_dtype(ctx.outputs[0].dtype(), [&]<typename Out>() {
           internal::reference_unary<In, Out>(ctx.inputs[0], ctx.outputs[0], [](In x) {
             if constexpr (std::is_same_v<In, Out>) {
               return x;
             } else if constexpr (std::is_same_v<Out, Half> || std::is_same_v<Out, BFloat16>) {
               // Straight from f32 so that f32 -> f16 rounds once.
               return Out(static_cast<float>(to_double(x)));
             } else {
               return from_double<Out>(to_double(x));
             }
           });
         });
       });
     }});

const OpSchema& kStopGradient = define_op({
    .name = "stop_gradient",
    .summary = "identity whose gradient is zero",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 1,
    .infer = [](const InferContext& ctx) { return std::vector<TensorSpec>{ctx.inputs[0]}; },
    .differentiable = false,
    .output_aliases_input = true,
});

const bool kStopGradientReference =
    register_kernel("stop_gradient", {.name = kReferenceKernel,
                                      .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)},
                                      .fn = internal::copy_if_distinct});

// A copy into new memory; the gradient passes through.
const OpSchema& kIdentity = define_op({
    .name = "identity",
    .summary = "a copy of x in new memory",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 1,
    .infer = [](const InferContext& ctx) { return std::vector<TensorSpec>{ctx.inputs[0]}; },
    .gradient = [](const GradContext& ctx) { return std::vector<Tensor>{ctx.grad_output(0)}; },
});
const bool kIdentityReference = register_kernel("identity", {.name = kReferenceKernel,
                                                             .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)},
                                                             .fn = internal::copy_if_distinct});

}  // namespace

Tensor Tensor::to(DType dtype) const { return dtype == this->dtype() ? *this : cast(*this, dtype); }
Tensor Tensor::clone() const { return call_op1(kIdentity, {*this}); }

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  if (is_symbolic()) throw InvalidArgument("to(device): symbolic tensors cannot move between devices yet");
  Tensor result = empty(shape(), dtype(), device);
  result.copy_from(*this);
  return result;
}

Tensor cast(const Tensor& x, DType dtype) { return call_op1(kCast, {x}, Attrs{{"dtype", dtype}}); }
Tensor stop_gradient(const Tensor& x) { return call_op1(kStopGradient, {x}); }

}  // namespace nimbus
