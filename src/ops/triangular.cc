// tril and triu: keep one side of diagonal k of the last two axes, zero the
// rest (causal attention masks). Each is linear, so its gradient is itself.
#include <fmt/format.h>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/registry.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus {
namespace {

std::vector<TensorSpec> infer_triangular(const InferContext& ctx) {
  const Shape& shape = ctx.inputs[0].shape;
  if (shape.rank() < 2) {
    ctx.fail(fmt::format("needs a matrix or a batch of matrices (rank 2 or more), got {} of rank {}", shape.to_string(),
                         shape.rank()),
             "reshape a vector to (1, n) or (n, 1) first");
  }
  return {ctx.inputs[0]};
}

// x (..., rows, cols) -> out: x where keep(row, col), zero elsewhere
template <typename Keep>
void reference_triangular(KernelContext& ctx, Keep keep) {
  const Tensor& x = ctx.inputs[0];
  const int64_t rows = x.dim(-2), cols = x.dim(-1);
  const int64_t k = ctx.attrs.get_int("k");
  visit_dtype(x.dtype(), [&]<typename T>() {
    const T* px = static_cast<const T*>(x.raw_data());
    T* po = static_cast<T*>(ctx.outputs[0].raw_data());
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t col = i % cols, row = i / cols % rows;
      po[i] = keep(row, col, k) ? px[i] : from_double<T>(0);
    }
  });
}

const OpSchema& kTril = define_op({
    .name = "tril",
    .summary = "keep elements on and below diagonal k of the last two axes, zero the rest",
    .kind = OpKind::kShape,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 1,
    .infer = infer_triangular,
    .gradient =
        [](const GradContext& ctx) { return std::vector<Tensor>{tril(ctx.grad_output(0), ctx.attrs.get_int("k"))}; },
});
const bool kTrilReference = register_kernel(
    "tril",
    {.name = kReferenceKernel, .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)}, .fn = [](KernelContext& ctx) {
       reference_triangular(ctx, [](int64_t row, int64_t col, int64_t k) { return col - row <= k; });
     }});

const OpSchema& kTriu = define_op({
    .name = "triu",
    .summary = "keep elements on and above diagonal k of the last two axes, zero the rest",
    .kind = OpKind::kShape,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 1,
    .infer = infer_triangular,
    .gradient =
        [](const GradContext& ctx) { return std::vector<Tensor>{triu(ctx.grad_output(0), ctx.attrs.get_int("k"))}; },
});
const bool kTriuReference = register_kernel(
    "triu",
    {.name = kReferenceKernel, .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)}, .fn = [](KernelContext& ctx) {
       reference_triangular(ctx, [](int64_t row, int64_t col, int64_t k) { return col - row >= k; });
     }});

}  // namespace

Tensor tril(const Tensor& x, int64_t k) { return call_op1(kTril, {x}, Attrs{{"k", k}}); }
Tensor triu(const Tensor& x, int64_t k) { return call_op1(kTriu, {x}, Attrs{{"k", k}}); }

}  // namespace nimbus
