// fused_matmul: activation(op(a) @ op(b) + bias), made by graph fusion from a
// matmul, a bias add and an activation, so that the backend runs them as one
// kernel (oneDNN's matmul with a bias and an eltwise post-op).
#include <fmt/format.h>

#include "nimbus/ops/activation_table.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/for_kernels/elementwise_defs.h"
#include "nimbus/ops/for_kernels/matmul_geometry.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/registry.h"

namespace nimbus {
namespace {

const OpSchema& kFusedMatmul = define_op({
    .name = "fused_matmul",
    .summary = "activation(op(a) @ op(b) + bias) in one kernel; built by graph fusion",
    .kind = OpKind::kLinalg,
    .precision = PrecisionRule::kComputeDType,
    .widen_16_bit = true,
    .num_inputs = 3,
    .infer =
        [](const InferContext& ctx) {
          ctx.expect_same_dtype(0, 1);
          ctx.expect_same_dtype(0, 2);
          internal::infer_unary_same(ctx, internal::kFloatingDTypes);
          const internal::MatmulGeometry geometry(ctx.inputs[0].shape, ctx.inputs[1].shape,
                                                  ctx.attrs.get_bool("transpose_a"), ctx.attrs.get_bool("transpose_b"));
          const Shape& bias = ctx.inputs[2].shape;
          if (bias.rank() != 1 || bias[0] != geometry.n) {
            ctx.fail(fmt::format("the bias has shape {}, the product's rows have {} elements: expected [{}]",
                                 bias.to_string(), geometry.n, geometry.n));
          }
          check_fused_activation(ctx);
          return std::vector<TensorSpec>{{geometry.output_shape, ctx.inputs[0].dtype}};
        },
    .differentiable = false,
});

// The unfused ops on their reference kernels: what the fused op means.
const bool kFusedMatmulReference = register_kernel(
    "fused_matmul",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(internal::kFloatingDTypes), .fn = [](KernelContext& ctx) {
       ReferenceKernelsScope reference;
       const Tensor product =
           matmul(ctx.inputs[0], ctx.inputs[1], ctx.attrs.get_bool("transpose_a"), ctx.attrs.get_bool("transpose_b"));
       ctx.outputs[0].copy_from(apply_activation(fused_activation_of(ctx.attrs), product + ctx.inputs[2]));
     }});

}  // namespace

Tensor fused_matmul(const Tensor& a, const Tensor& b, const Tensor& bias, const std::string& activation,
                    bool transpose_a, bool transpose_b) {
  return call_op1(kFusedMatmul, {a, b, bias},
                  Attrs{{"transpose_a", transpose_a}, {"transpose_b", transpose_b}, {"activation", activation}});
}

}  // namespace nimbus
