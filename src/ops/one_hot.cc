// one_hot: integer class ids -> vectors with `on` at the id and `off` elsewhere.
#include <fmt/format.h>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/registry.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus {
namespace {

const OpSchema& kOneHot = define_op({
    .name = "one_hot",
    .summary = "(...) class ids -> (..., depth) with on at the id, off elsewhere; out-of-range ids give all off",
    .kind = OpKind::kShape,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 1,
    .infer =
        [](const InferContext& ctx) {
          ctx.expect_dtype(0, {DType::kI32, DType::kI64, DType::kU8});
          const int64_t depth = ctx.attrs.get_int("depth");
          if (depth < 0) ctx.fail(fmt::format("depth {} is negative", depth));
          Shape shape = ctx.inputs[0].shape;
          shape.push_back(depth);
          return std::vector<TensorSpec>{{shape, ctx.attrs.get_dtype("dtype")}};
        },
    .differentiable = false,
});

const bool kOneHotReference = register_kernel(
    "one_hot",
    {.name = kReferenceKernel, .dtypes = {DType::kI32, DType::kI64, DType::kU8}, .fn = [](KernelContext& ctx) {
       const Tensor& ids = ctx.inputs[0];
       Tensor& out = ctx.outputs[0];
       const int64_t depth = ctx.attrs.get_int("depth");
       const double on = ctx.attrs.get_float("on"), off = ctx.attrs.get_float("off");
       visit_dtype(ids.dtype(), [&]<typename I>() {
         visit_dtype(out.dtype(), [&]<typename T>() {
           const I* pi = static_cast<const I*>(ids.raw_data());
           T* po = static_cast<T*>(out.raw_data());
           for (int64_t i = 0; i < ids.numel(); ++i) {
             const int64_t id = static_cast<int64_t>(to_double(pi[i]));
             for (int64_t c = 0; c < depth; ++c) po[i * depth + c] = from_double<T>(c == id ? on : off);
           }
         });
       });
     }});

}  // namespace

Tensor one_hot(const Tensor& indices, int64_t depth, DType dtype, double on, double off) {
  return call_op1(kOneHot, {indices}, Attrs{{"depth", depth}, {"dtype", dtype}, {"on", on}, {"off", off}});
}

}  // namespace nimbus
