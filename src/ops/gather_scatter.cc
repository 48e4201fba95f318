// gather (pick entries along an axis by index: embedding lookups) and
// scatter_add (sum entries into those positions: gather's gradient); and
// segment_sum, a composite over scatter_add.
#include <fmt/format.h>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/for_kernels/elementwise_defs.h"
#include "nimbus/ops/for_kernels/gather_geometry.h"
#include "nimbus/ops/for_kernels/reduce_geometry.h"
#include "nimbus/ops/registry.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus {
namespace {

using internal::AxisSplit;

// The axis of `operand` that indices select along, checked, with the shape indexing yields.
int gather_axis(const InferContext& ctx, const Shape& operand, const char* operand_name) {
  ctx.expect_dtype(1, {DType::kI32, DType::kI64});
  if (operand.rank() == 0) ctx.fail(fmt::format("{} is a scalar: there is no axis to index", operand_name));
  const int axis = normalize_axis(ctx.attrs.get_int("axis"), operand.rank(), ctx.op.name.c_str());
  const Shape& indices = ctx.inputs[1].shape;
  if (operand.rank() - 1 + indices.rank() > kMaxRank) {
    ctx.fail(fmt::format("indexing axis {} of {} with indices {} gives rank {}, more than the maximum {}", axis,
                         operand.to_string(), indices.to_string(), operand.rank() - 1 + indices.rank(), kMaxRank),
             "flatten the indices first");
  }
  return axis;
}

// ---- gather ----

const OpSchema& kGather = define_op({
    .name = "gather",
    .summary = "entries of params along an axis picked by integer indices (embedding lookup)",
    .kind = OpKind::kShape,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 2,
    .infer =
        [](const InferContext& ctx) {
          const Shape& params = ctx.inputs[0].shape;
          const int axis = gather_axis(ctx, params, "params");
          return std::vector<TensorSpec>{
              {internal::gathered_shape(params, ctx.inputs[1].shape, axis), ctx.inputs[0].dtype}};
        },
    .gradient =
        [](const GradContext& ctx) {
          const Tensor& indices = ctx.inputs[1];
          return std::vector<Tensor>{
              scatter_add(ctx.grad_output(0), indices, ctx.inputs[0].shape(), ctx.attrs.get_int("axis")), Tensor()};
        },
    .dispatch_input = 0,
});

// params (outer, axis, inner), indices (count) -> out (outer, count, inner)
const bool kGatherReference = register_kernel(
    "gather",
    {.name = kReferenceKernel, .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)}, .fn = [](KernelContext& ctx) {
       const Tensor& params = ctx.inputs[0];
       const int axis = normalize_axis(ctx.attrs.get_int("axis"), params.rank(), "gather");
       const std::vector<int64_t> indices = internal::checked_indices("gather", ctx.inputs[1], params.shape(), axis);
       const AxisSplit split(params.shape(), axis);
       const int64_t count = std::ssize(indices);
       visit_dtype(params.dtype(), [&]<typename T>() {
         const T* pp = static_cast<const T*>(params.raw_data());
         T* po = static_cast<T*>(ctx.outputs[0].raw_data());
         for (int64_t o = 0; o < split.outer; ++o) {
           for (int64_t n = 0; n < count; ++n) {
             for (int64_t i = 0; i < split.inner; ++i) {
               po[(o * count + n) * split.inner + i] = pp[(o * split.axis + indices[n]) * split.inner + i];
             }
           }
         }
       });
     }});

// ---- scatter_add ----

const OpSchema& kScatterAdd = define_op({
    .name = "scatter_add",
    .summary = "zeros of `shape` with updates summed in at the indexed entries along an axis (gather's gradient)",
    .kind = OpKind::kShape,
    .precision = PrecisionRule::kFloat32,  // accumulates (embedding gradients)
    .num_inputs = 2,
    .infer =
        [](const InferContext& ctx) {
          internal::infer_unary_same(ctx, internal::kNumericDTypes);
          const Shape& shape = ctx.attrs.get_shape("shape");
          const int axis = gather_axis(ctx, shape, "shape");
          const Shape expected = internal::gathered_shape(shape, ctx.inputs[1].shape, axis);
          if (ctx.inputs[0].shape != expected) {
            ctx.fail(
                fmt::format("updates have shape {}, but scattering along axis {} of {} with indices {} needs "
                            "updates of shape {}",
                            ctx.inputs[0].shape.to_string(), axis, shape.to_string(), ctx.inputs[1].shape.to_string(),
                            expected.to_string()));
          }
          return std::vector<TensorSpec>{{shape, ctx.inputs[0].dtype}};
        },
    .gradient =
        [](const GradContext& ctx) {
          return std::vector<Tensor>{gather(ctx.grad_output(0), ctx.inputs[1], ctx.attrs.get_int("axis")), Tensor()};
        },
    .dispatch_input = 0,
});

// updates (outer, count, inner), indices (count) -> out (outer, axis, inner),
// summed in double in index order, so duplicates accumulate reproducibly.
const bool kScatterAddReference = register_kernel(
    "scatter_add",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(internal::kNumericDTypes), .fn = [](KernelContext& ctx) {
       const Tensor& updates = ctx.inputs[0];
       Tensor& out = ctx.outputs[0];
       const int axis = normalize_axis(ctx.attrs.get_int("axis"), out.rank(), "scatter_add");
       const std::vector<int64_t> indices = internal::checked_indices("scatter_add", ctx.inputs[1], out.shape(), axis);
       const AxisSplit split(out.shape(), axis);
       const int64_t count = std::ssize(indices);
       std::vector<double> sums(static_cast<size_t>(out.numel()), 0.0);
       visit_dtype(updates.dtype(), [&]<typename T>() {
         const T* pu = static_cast<const T*>(updates.raw_data());
         for (int64_t o = 0; o < split.outer; ++o) {
           for (int64_t n = 0; n < count; ++n) {
             for (int64_t i = 0; i < split.inner; ++i) {
               sums[static_cast<size_t>((o * split.axis + indices[n]) * split.inner + i)] +=
                   to_double(pu[(o * count + n) * split.inner + i]);
             }
           }
         }
         T* po = static_cast<T*>(out.raw_data());
         for (int64_t j = 0; j < out.numel(); ++j) po[j] = from_double<T>(sums[static_cast<size_t>(j)]);
       });
     }});

}  // namespace

Tensor gather(const Tensor& params, const Tensor& indices, int64_t axis) {
  return call_op1(kGather, {params, indices}, Attrs{{"axis", axis}});
}

Tensor scatter_add(const Tensor& updates, const Tensor& indices, const Shape& shape, int64_t axis) {
  return call_op1(kScatterAdd, {updates, indices}, Attrs{{"shape", shape}, {"axis", axis}});
}

Tensor segment_sum(const Tensor& data, const Tensor& segment_ids, int64_t num_segments) {
  if (data.rank() == 0) throw InvalidArgument("segment_sum: data is a scalar; segments run along its first axis");
  if (segment_ids.rank() != 1 || segment_ids.dim(0) != data.dim(0)) {
    throw InvalidArgument(
        fmt::format("segment_sum: segment_ids have shape {}, data {} needs one id per row: shape [{}]",
                    segment_ids.shape().to_string(), data.shape().to_string(), data.dim(0)));
  }
  if (num_segments < 0) throw InvalidArgument(fmt::format("segment_sum: num_segments = {} is negative", num_segments));
  Shape shape = data.shape();
  shape[0] = num_segments;
  return scatter_add(data, segment_ids, shape, 0);
}

}  // namespace nimbus
