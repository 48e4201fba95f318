// matmul: batched matrix multiplication with broadcast batch axes and
// optional transposes of either operand.
#include <fmt/format.h>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/for_kernels/elementwise_defs.h"
#include "nimbus/ops/for_kernels/matmul_geometry.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/registry.h"

namespace nimbus {
namespace {

using internal::MatmulGeometry;

const OpSchema& kMatmul = define_op({
    .name = "matmul",
    .summary = "op(a) @ op(b) with op = transpose when asked; batch axes broadcast",
    .kind = OpKind::kLinalg,
    .precision = PrecisionRule::kComputeDType,  // batched too: matmul takes leading batch axes
    .widen_16_bit = true,
    .num_inputs = 2,
    .infer =
        [](const InferContext& ctx) {
          ctx.expect_same_dtype(0, 1);
          internal::infer_unary_same(ctx, internal::kFloatingDTypes);
          const MatmulGeometry geometry(ctx.inputs[0].shape, ctx.inputs[1].shape, ctx.attrs.get_bool("transpose_a"),
                                        ctx.attrs.get_bool("transpose_b"));
          return std::vector<TensorSpec>{{geometry.output_shape, ctx.inputs[0].dtype}};
        },
    .gradient =
        [](const GradContext& ctx) {
          const Tensor g = ctx.grad_output(0);
          const Tensor& a = ctx.inputs[0];
          const Tensor& b = ctx.inputs[1];
          const bool ta = ctx.attrs.get_bool("transpose_a"), tb = ctx.attrs.get_bool("transpose_b");
          // C = op(A) op(B). Each case picks the product that yields dA (dB) in A's (B's) own layout.
          Tensor grad_a, grad_b;
          if (ctx.needs(0)) {
            grad_a = ta ? matmul(b, g, tb, true) : matmul(g, b, false, !tb);
            grad_a = reduce_to_shape(grad_a, a.shape());
          }
          if (ctx.needs(1)) {
            grad_b = tb ? matmul(g, a, true, ta) : matmul(a, g, !ta, false);
            grad_b = reduce_to_shape(grad_b, b.shape());
          }
          return std::vector<Tensor>{grad_a, grad_b};
        },
});

// The plainest loops, accumulating in double: the oracle for oneDNN.
const bool kMatmulReference = register_kernel(
    "matmul",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(internal::kFloatingDTypes), .fn = [](KernelContext& ctx) {
       const Tensor& a = ctx.inputs[0];
       const Tensor& b = ctx.inputs[1];
       const bool ta = ctx.attrs.get_bool("transpose_a"), tb = ctx.attrs.get_bool("transpose_b");
       const MatmulGeometry g(a.shape(), b.shape(), ta, tb);
       visit_dtype(a.dtype(), [&]<typename T>() {
         const T* pa = static_cast<const T*>(a.raw_data());
         const T* pb = static_cast<const T*>(b.raw_data());
         T* pc = static_cast<T*>(ctx.outputs[0].raw_data());
         for (int64_t batch = 0; batch < g.batch; ++batch) {
           const T* ma = pa + g.a_batch_offset(batch);
           const T* mb = pb + g.b_batch_offset(batch);
           T* mc = pc + batch * g.m * g.n;
           for (int64_t i = 0; i < g.m; ++i) {
             for (int64_t j = 0; j < g.n; ++j) {
               double total = 0;
               for (int64_t k = 0; k < g.k; ++k) {
                 const T& x = ta ? ma[k * g.m + i] : ma[i * g.k + k];
                 const T& y = tb ? mb[j * g.k + k] : mb[k * g.n + j];
                 total += to_double(x) * to_double(y);
               }
               mc[i * g.n + j] = from_double<T>(total);
             }
           }
         }
       });
     }});

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  return call_op1(kMatmul, {a, b}, Attrs{{"transpose_a", transpose_a}, {"transpose_b", transpose_b}});
}

}  // namespace nimbus
