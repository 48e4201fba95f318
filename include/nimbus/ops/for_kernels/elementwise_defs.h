// Shape rules and reference-kernel builders shared by the elementwise op
// families (arithmetic, comparisons, unary math, activations). Shared with the kernels (src/kernels/).
#pragma once

#include <fmt/format.h>

#include <initializer_list>
#include <vector>

#include "nimbus/ops/for_kernels/kernel_util.h"
#include "nimbus/ops/op_schema.h"
#include "nimbus/ops/registry.h"

namespace nimbus::internal {

inline constexpr DType kFloatingDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16};
inline constexpr DType kNumericDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
                                           DType::kI32, DType::kI64, DType::kU8};

inline std::vector<DType> dtype_list(std::span<const DType> dtypes) { return {dtypes.begin(), dtypes.end()}; }

// Two inputs of one dtype from `allowed`, broadcast; the output has `result` dtype
// or, when `result_is_input` is true, the inputs' dtype.
inline std::vector<TensorSpec> infer_broadcast_binary(const InferContext& ctx, std::span<const DType> allowed,
                                                      bool result_is_input, DType result = DType::kBool) {
  ctx.expect_same_dtype(0, 1);
  const DType dtype = ctx.inputs[0].dtype;
  bool ok = false;
  for (DType d : allowed) ok = ok || d == dtype;
  if (!ok) {
    std::vector<std::string_view> names;
    for (DType d : allowed) names.push_back(dtype_name(d));
    ctx.fail(fmt::format("dtype {} is not supported (supported: {})", dtype_name(dtype), fmt::join(names, ", ")));
  }
  const Shape shape = broadcast_shapes(ctx.inputs[0].shape, ctx.inputs[1].shape, ctx.op.name.c_str());
  return {{shape, result_is_input ? dtype : result}};
}

// Registers a reference kernel computing out = f(a, b) in the compute type of
// each dtype in `dtypes`, with an output of the same dtype.
template <typename F>
bool register_binary_reference(const char* op, std::span<const DType> dtypes, F f) {
  return register_kernel(op, {.name = kReferenceKernel, .dtypes = dtype_list(dtypes), .fn = [f](KernelContext& ctx) {
                                visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
                                  if constexpr (!std::is_same_v<T, bool>) {
                                    reference_binary<T, T>(ctx.inputs[0], ctx.inputs[1], ctx.outputs[0],
                                                           [&](T a, T b) { return store<T>(f(load(a), load(b))); });
                                  }
                                });
                              }});
}

// The same for a unary op out = f(x).
template <typename F>
bool register_unary_reference(const char* op, std::span<const DType> dtypes, F f) {
  return register_kernel(op, {.name = kReferenceKernel, .dtypes = dtype_list(dtypes), .fn = [f](KernelContext& ctx) {
                                visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
                                  if constexpr (!std::is_same_v<T, bool>) {
                                    reference_unary<T, T>(ctx.inputs[0], ctx.outputs[0],
                                                          [&](T x) { return store<T>(f(load(x))); });
                                  }
                                });
                              }});
}

// One input of a dtype from `allowed`; the output has the same shape and dtype.
inline std::vector<TensorSpec> infer_unary_same(const InferContext& ctx, std::span<const DType> allowed) {
  const DType dtype = ctx.inputs[0].dtype;
  bool ok = false;
  for (DType d : allowed) ok = ok || d == dtype;
  if (!ok) {
    std::vector<std::string_view> names;
    for (DType d : allowed) names.push_back(dtype_name(d));
    ctx.fail(fmt::format("dtype {} is not supported (supported: {})", dtype_name(dtype), fmt::join(names, ", ")));
  }
  return {ctx.inputs[0]};
}

}  // namespace nimbus::internal
