// top_k: the k largest values along the last axis, sorted descending, and
// their indices.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "nimbus/ops/creation.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/for_kernels/elementwise_defs.h"
#include "nimbus/ops/registry.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus {
namespace {

// Descending order with NaN above every number, so that the order is strict
// and weak (std::stable_sort needs it) whatever the data holds.
bool ranks_higher(double a, double b) {
  if (std::isnan(a)) return !std::isnan(b);
  if (std::isnan(b)) return false;
  return a > b;
}

const OpSchema& kTopK = define_op({
    .name = "top_k",
    .summary = "the k largest values along the last axis, descending (ties: lower index first), and their i64 indices",
    .kind = OpKind::kShape,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 1,
    .infer =
        [](const InferContext& ctx) {
          internal::infer_unary_same(ctx, internal::kNumericDTypes);
          const Shape& shape = ctx.inputs[0].shape;
          if (shape.rank() == 0) ctx.fail("needs an axis to choose from, got a scalar", "reshape it to [1] first");
          const int64_t k = ctx.attrs.get_int("k");
          const int64_t length = shape[-1];
          if (k < 0) ctx.fail(fmt::format("k = {} is negative", k));
          if (k > length) {
            ctx.fail(fmt::format("k = {} is larger than the last axis of {} (length {})", k, shape.to_string(), length),
                     fmt::format("k can be at most {}", length));
          }
          Shape out = shape;
          out[-1] = k;
          return std::vector<TensorSpec>{{out, ctx.inputs[0].dtype}, {out, DType::kI64}};
        },
    .gradient =
        [](const GradContext& ctx) {
          // Only the values carry a gradient: scatter it into zeros at the chosen indices.
          // Rows are flattened into one long axis, so that each row's indices become
          // positions on it and one scatter_add does every row.
          const Tensor& x = ctx.inputs[0];
          const Tensor& indices = ctx.outputs[1];
          const int64_t length = x.dim(-1), k = indices.dim(-1);
          if (k == 0) return std::vector<Tensor>{zeros_like(x)};
          const int64_t rows = indices.numel() / k;
          const Tensor row_starts = reshape(
              arange(0, static_cast<double>(rows * length), static_cast<double>(length), DType::kI64, x.device()),
              Shape{rows, 1});
          const Tensor positions = reshape(add(reshape(indices, Shape{rows, k}), row_starts), Shape{rows * k});
          const Tensor grad =
              scatter_add(reshape(ctx.grad_output(0), Shape{rows * k}), positions, Shape{rows * length}, 0);
          return std::vector<Tensor>{reshape(grad, x.shape())};
        },
});

// x (rows, length) -> values (rows, k), indices (rows, k): a stable sort of each row.
const bool kTopKReference = register_kernel(
    "top_k",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(internal::kNumericDTypes), .fn = [](KernelContext& ctx) {
       const Tensor& x = ctx.inputs[0];
       const int64_t length = x.dim(-1);
       const int64_t k = ctx.attrs.get_int("k");
       const int64_t rows = ctx.outputs[1].numel() / std::max<int64_t>(k, 1);
       int64_t* pi = static_cast<int64_t*>(ctx.outputs[1].raw_data());
       visit_dtype(x.dtype(), [&]<typename T>() {
         const T* px = static_cast<const T*>(x.raw_data());
         T* pv = static_cast<T*>(ctx.outputs[0].raw_data());
         std::vector<int64_t> order(static_cast<size_t>(length));
         for (int64_t r = 0; r < rows; ++r) {
           const T* row = px + r * length;
           std::iota(order.begin(), order.end(), 0);
           std::stable_sort(order.begin(), order.end(),
                            [&](int64_t a, int64_t b) { return ranks_higher(to_double(row[a]), to_double(row[b])); });
           for (int64_t j = 0; j < k; ++j) {
             pv[r * k + j] = row[order[static_cast<size_t>(j)]];
             pi[r * k + j] = order[static_cast<size_t>(j)];
           }
         }
       });
     }});

}  // namespace

std::pair<Tensor, Tensor> top_k(const Tensor& x, int64_t k) {
  std::vector<Tensor> outputs = call_op(kTopK, {x}, Attrs{{"k", k}});
  return {std::move(outputs[0]), std::move(outputs[1])};
}

}  // namespace nimbus
