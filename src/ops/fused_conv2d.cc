// fused_conv2d: activation(conv2d(x, filter) + bias), made by graph fusion
// from a channels-last convolution, a bias add over its channels and an
// activation, so that the backend runs them as one kernel (oneDNN's
// convolution with a bias and an eltwise post-op).
#include <fmt/format.h>

#include "nimbus/ops/activation_table.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/for_kernels/elementwise_defs.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/registry.h"

namespace nimbus {
namespace {

const OpSchema& conv2d_op() { return OpRegistry::global().get("conv2d"); }

const OpSchema& kFusedConv2d = define_op({
    .name = "fused_conv2d",
    .summary = "activation(conv2d(x, filter) + bias) for channels-last data in one kernel; built by graph fusion",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kComputeDType,
    .widen_16_bit = true,
    .num_inputs = 3,
    .infer =
        [](const InferContext& ctx) {
          ctx.expect_same_dtype(0, 2);
          std::vector<TensorSpec> convolved = infer_outputs(conv2d_op(), ctx.inputs.first(2), ctx.attrs);
          if (ctx.attrs.get_string("data_format") != "NHWC") {
            ctx.fail("the bias is added over the last axis: only data_format NHWC fuses");
          }
          const Shape& out = convolved[0].shape;
          const Shape& bias = ctx.inputs[2].shape;
          if (bias.rank() != 1 || bias[0] != out[out.rank() - 1]) {
            ctx.fail(fmt::format("the bias has shape {}, the output has {} channels: expected [{}]", bias.to_string(),
                                 out[out.rank() - 1], out[out.rank() - 1]));
          }
          check_fused_activation(ctx);
          return convolved;
        },
    .differentiable = false,
});

// The unfused ops on their reference kernels: what the fused op means.
const bool kFusedConv2dReference = register_kernel(
    "fused_conv2d",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(internal::kFloatingDTypes), .fn = [](KernelContext& ctx) {
       ReferenceKernelsScope reference;
       const Tensor convolved = call_op(conv2d_op(), ctx.inputs.first(2), ctx.attrs)[0];
       ctx.outputs[0].copy_from(apply_activation(fused_activation_of(ctx.attrs), convolved + ctx.inputs[2]));
     }});

}  // namespace
}  // namespace nimbus
