// Comparisons, logical ops and where. Comparisons and logical ops return bool
// and are not differentiable; where passes gradients to the branch it picked.
#include <fmt/format.h>

#include "nimbus/ops/creation.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/for_kernels/elementwise_defs.h"
#include "nimbus/ops/reduction.h"

namespace nimbus {
namespace {

using internal::broadcast_offset;
using internal::broadcast_strides;
using internal::load;

std::vector<TensorSpec> infer_comparison(const InferContext& ctx) {
  return internal::infer_broadcast_binary(ctx, kAllDTypes, false, DType::kBool);
}

template <typename F>
bool register_comparison_reference(const char* op, F f) {
  return register_kernel(op, {.name = kReferenceKernel,
                              .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)},
                              .fn = [f](KernelContext& ctx) {
                                visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
                                  internal::reference_binary<T, bool>(ctx.inputs[0], ctx.inputs[1], ctx.outputs[0],
                                                                      [&](T a, T b) { return f(load(a), load(b)); });
                                });
                              }});
}

OpSchema comparison_schema(const char* name, const char* summary, bool widen_16_bit) {
  return OpSchema{.name = name,
                  .summary = summary,
                  .kind = OpKind::kElementwise,
                  .precision = PrecisionRule::kFollowInputs,
                  .widen_16_bit = widen_16_bit,
                  .num_inputs = 2,
                  .infer = infer_comparison,
                  .differentiable = false};
}

const OpSchema& kEqual = define_op(comparison_schema("equal", "a == b (bool)", /*widen_16_bit=*/true));
const OpSchema& kNotEqual = define_op(comparison_schema("not_equal", "a != b (bool)", /*widen_16_bit=*/false));
const OpSchema& kLess = define_op(comparison_schema("less", "a < b (bool)", /*widen_16_bit=*/true));
const OpSchema& kLessEqual = define_op(comparison_schema("less_equal", "a <= b (bool)", /*widen_16_bit=*/true));
const OpSchema& kGreater = define_op(comparison_schema("greater", "a > b (bool)", /*widen_16_bit=*/true));
const OpSchema& kGreaterEqual = define_op(comparison_schema("greater_equal", "a >= b (bool)", /*widen_16_bit=*/true));

const bool kComparisonReferences =
    register_comparison_reference("equal", [](auto a, auto b) { return a == b; }) &&
    register_comparison_reference("not_equal", [](auto a, auto b) { return a != b; }) &&
    register_comparison_reference("less", [](auto a, auto b) { return a < b; }) &&
    register_comparison_reference("less_equal", [](auto a, auto b) { return a <= b; }) &&
    register_comparison_reference("greater", [](auto a, auto b) { return a > b; }) &&
    register_comparison_reference("greater_equal", [](auto a, auto b) { return a >= b; });

// ---- logical_and, logical_or, logical_not ----

std::vector<TensorSpec> infer_logical_binary(const InferContext& ctx) {
  static constexpr DType kBoolOnly[] = {DType::kBool};
  return internal::infer_broadcast_binary(ctx, kBoolOnly, true);
}

const OpSchema& kLogicalAnd = define_op({.name = "logical_and",
                                         .summary = "a && b on bool tensors",
                                         .kind = OpKind::kElementwise,
                                         .precision = PrecisionRule::kFollowInputs,
                                         .num_inputs = 2,
                                         .infer = infer_logical_binary,
                                         .differentiable = false});
const OpSchema& kLogicalOr = define_op({.name = "logical_or",
                                        .summary = "a || b on bool tensors",
                                        .kind = OpKind::kElementwise,
                                        .precision = PrecisionRule::kFollowInputs,
                                        .num_inputs = 2,
                                        .infer = infer_logical_binary,
                                        .differentiable = false});
const OpSchema& kLogicalNot = define_op({.name = "logical_not",
                                         .summary = "!x on a bool tensor",
                                         .kind = OpKind::kElementwise,
                                         .precision = PrecisionRule::kFollowInputs,
                                         .num_inputs = 1,
                                         .infer =
                                             [](const InferContext& ctx) {
                                               ctx.expect_dtype(0, {DType::kBool});
                                               return std::vector<TensorSpec>{ctx.inputs[0]};
                                             },
                                         .differentiable = false});

const bool kLogicalReferences =
    register_kernel("logical_and", {.name = kReferenceKernel,
                                    .dtypes = {DType::kBool},
                                    .fn =
                                        [](KernelContext& ctx) {
                                          internal::reference_binary<bool, bool>(ctx.inputs[0], ctx.inputs[1],
                                                                                 ctx.outputs[0],
                                                                                 [](bool a, bool b) { return a && b; });
                                        }}) &&
    register_kernel("logical_or", {.name = kReferenceKernel,
                                   .dtypes = {DType::kBool},
                                   .fn =
                                       [](KernelContext& ctx) {
                                         internal::reference_binary<bool, bool>(ctx.inputs[0], ctx.inputs[1],
                                                                                ctx.outputs[0],
                                                                                [](bool a, bool b) { return a || b; });
                                       }}) &&
    register_kernel("logical_not", {.name = kReferenceKernel, .dtypes = {DType::kBool}, .fn = [](KernelContext& ctx) {
                                      internal::reference_unary<bool, bool>(ctx.inputs[0], ctx.outputs[0],
                                                                            [](bool x) { return !x; });
                                    }});

// ---- where ----

const OpSchema& kWhere = define_op({
    .name = "where",
    .summary = "cond ? a : b, all three broadcast",
    .kind = OpKind::kElementwise,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 3,
    .infer =
        [](const InferContext& ctx) {
          ctx.expect_dtype(0, {DType::kBool});
          ctx.expect_same_dtype(1, 2);
          const char* name = ctx.op.name.c_str();
          const Shape shape = broadcast_shapes(ctx.inputs[0].shape,
                                               broadcast_shapes(ctx.inputs[1].shape, ctx.inputs[2].shape, name), name);
          return std::vector<TensorSpec>{{shape, ctx.inputs[1].dtype}};
        },
    .gradient =
        [](const GradContext& ctx) {
          const Tensor g = ctx.grad_output(0);
          const Tensor zero = zeros_like(g);
          const Tensor& cond = ctx.inputs[0];
          return std::vector<Tensor>{
              Tensor(), ctx.needs(1) ? reduce_to_shape(where(cond, g, zero), ctx.inputs[1].shape()) : Tensor(),
              ctx.needs(2) ? reduce_to_shape(where(cond, zero, g), ctx.inputs[2].shape()) : Tensor()};
        },
    .dispatch_input = 1,
});

const bool kWhereReference = register_kernel(
    "where",
    {.name = kReferenceKernel, .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)}, .fn = [](KernelContext& ctx) {
       const Tensor& cond = ctx.inputs[0];
       const Tensor& out = ctx.outputs[0];
       const auto sc = broadcast_strides(cond.shape(), out.shape());
       const auto sa = broadcast_strides(ctx.inputs[1].shape(), out.shape());
       const auto sb = broadcast_strides(ctx.inputs[2].shape(), out.shape());
       visit_dtype(out.dtype(), [&]<typename T>() {
         const bool* pc = static_cast<const bool*>(cond.raw_data());
         const T* pa = static_cast<const T*>(ctx.inputs[1].raw_data());
         const T* pb = static_cast<const T*>(ctx.inputs[2].raw_data());
         T* po = static_cast<T*>(out.raw_data());
         for (int64_t i = 0; i < out.numel(); ++i) {
           po[i] = pc[broadcast_offset(i, out.shape(), sc)] ? pa[broadcast_offset(i, out.shape(), sa)]
                                                            : pb[broadcast_offset(i, out.shape(), sb)];
         }
       });
     }});

}  // namespace

Tensor equal(const Tensor& a, const Tensor& b) { return call_op1(kEqual, {a, b}); }
Tensor not_equal(const Tensor& a, const Tensor& b) { return call_op1(kNotEqual, {a, b}); }
Tensor less(const Tensor& a, const Tensor& b) { return call_op1(kLess, {a, b}); }
Tensor less_equal(const Tensor& a, const Tensor& b) { return call_op1(kLessEqual, {a, b}); }
Tensor greater(const Tensor& a, const Tensor& b) { return call_op1(kGreater, {a, b}); }
Tensor greater_equal(const Tensor& a, const Tensor& b) { return call_op1(kGreaterEqual, {a, b}); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return call_op1(kLogicalAnd, {a, b}); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return call_op1(kLogicalOr, {a, b}); }
Tensor logical_not(const Tensor& x) { return call_op1(kLogicalNot, {x}); }
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) { return call_op1(kWhere, {cond, a, b}); }

}  // namespace nimbus
