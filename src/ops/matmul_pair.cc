// matmul_pair: two independent matmuls in one node, so that a backend can run them side by side (the CPU's
// kernel gives each product one thread of a two-thread pool). The graph's matmul pairing makes it from a dense
// layer's two gradient products (docs/graph.md); it has no public function.
#include <fmt/format.h>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/for_kernels/elementwise_defs.h"
#include "nimbus/ops/for_kernels/matmul_geometry.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/registry.h"

namespace nimbus {
namespace {

// Inputs (a0, b0, a1, b1) -> outputs (op(a0) @ op(b0), op(a1) @ op(b1)), each op a transpose when its attribute
// (transpose_a0, transpose_b0, transpose_a1, transpose_b1) says so.
const OpSchema& kMatmulPair = define_op({
    .name = "matmul_pair",
    .summary = "op(a0) @ op(b0) and op(a1) @ op(b1), 2-D, as two outputs of one node; built by graph fusion",
    .kind = OpKind::kLinalg,
    .precision = PrecisionRule::kComputeDType,
    .num_inputs = 4,
    .infer =
        [](const InferContext& ctx) {
          internal::infer_unary_same(ctx, internal::kFloatingDTypes);
          std::vector<TensorSpec> outputs;
          for (int product = 0; product < 2; ++product) {
            const int a = 2 * product, b = a + 1;
            ctx.expect_same_dtype(0, a);
            ctx.expect_same_dtype(0, b);
            ctx.expect_rank(a, 2);
            ctx.expect_rank(b, 2);
            const internal::MatmulGeometry geometry(ctx.inputs[a].shape, ctx.inputs[b].shape,
                                                    ctx.attrs.get_bool(fmt::format("transpose_a{}", product)),
                                                    ctx.attrs.get_bool(fmt::format("transpose_b{}", product)));
            outputs.push_back({geometry.output_shape, ctx.inputs[0].dtype});
          }
          return outputs;
        },
    .differentiable = false,
});

// The two matmuls on their reference kernels: what the pair means.
const bool kMatmulPairReference = register_kernel(
    "matmul_pair",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(internal::kFloatingDTypes), .fn = [](KernelContext& ctx) {
       ReferenceKernelsScope reference;
       for (int product = 0; product < 2; ++product) {
         ctx.outputs[static_cast<size_t>(product)].copy_from(
             matmul(ctx.inputs[static_cast<size_t>(2 * product)], ctx.inputs[static_cast<size_t>(2 * product + 1)],
                    ctx.attrs.get_bool(fmt::format("transpose_a{}", product)),
                    ctx.attrs.get_bool(fmt::format("transpose_b{}", product))));
       }
     }});

}  // namespace
}  // namespace nimbus
