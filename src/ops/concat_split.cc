// concat (join tensors along an axis) and split (cut one tensor into pieces
// along an axis): each is the other's gradient.
#include <fmt/format.h>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/for_kernels/reduce_geometry.h"
#include "nimbus/ops/registry.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus {
namespace {

using internal::AxisSplit;

// ---- concat ----

const OpSchema& kConcat = define_op({
    .name = "concat",
    .summary = "join tensors along an axis; every other dimension must match",
    .kind = OpKind::kShape,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 1,
    .variadic_inputs = true,
    .infer =
        [](const InferContext& ctx) {
          const TensorSpec& first = ctx.inputs[0];
          if (first.shape.rank() == 0) ctx.fail("cannot concatenate scalars", "expand_dims them to shape [1] first");
          const int axis = normalize_axis(ctx.attrs.get_int("axis"), first.shape.rank(), "concat");
          Shape out = first.shape;
          int64_t total = 0;
          for (size_t i = 0; i < ctx.inputs.size(); ++i) {
            const TensorSpec& input = ctx.inputs[i];
            if (input.dtype != first.dtype) {
              ctx.fail(fmt::format("input {} has dtype {}, input 0 has {}", i, dtype_name(input.dtype),
                                   dtype_name(first.dtype)),
                       "convert them to one dtype with .to(dtype); Nimbus does not promote dtypes implicitly");
            }
            bool matches = input.shape.rank() == first.shape.rank();
            for (int d = 0; matches && d < first.shape.rank(); ++d) {
              matches = d == axis || input.shape.dims()[d] == first.shape.dims()[d];
            }
            if (!matches) {
              ctx.fail(
                  fmt::format("input {} has shape {}, input 0 has shape {}: joining along axis {} needs the same "
                              "rank and equal dimensions on every other axis",
                              i, input.shape.to_string(), first.shape.to_string(), axis));
            }
            total += input.shape.dims()[axis];
          }
          out[axis] = total;
          return std::vector<TensorSpec>{{out, first.dtype}};
        },
    .gradient =
        [](const GradContext& ctx) {
          const int64_t axis = ctx.attrs.get_int("axis");
          const int normalized = normalize_axis(axis, ctx.inputs[0].rank(), "concat");
          std::vector<int64_t> sizes;
          for (const Tensor& input : ctx.inputs) sizes.push_back(input.dim(normalized));
          return split(ctx.grad_output(0), sizes, axis);
        },
});

// inputs (outer, axis_i, inner) -> out (outer, sum of axis_i, inner)
const bool kConcatReference = register_kernel(
    "concat",
    {.name = kReferenceKernel, .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)}, .fn = [](KernelContext& ctx) {
       Tensor& out = ctx.outputs[0];
       const int axis = normalize_axis(ctx.attrs.get_int("axis"), out.rank(), "concat");
       const AxisSplit out_split(out.shape(), axis);
       visit_dtype(out.dtype(), [&]<typename T>() {
         T* po = static_cast<T*>(out.raw_data());
         int64_t axis_offset = 0;
         for (const Tensor& input : ctx.inputs) {
           const AxisSplit in_split(input.shape(), axis);
           const T* pi = static_cast<const T*>(input.raw_data());
           for (int64_t o = 0; o < in_split.outer; ++o) {
             for (int64_t a = 0; a < in_split.axis; ++a) {
               for (int64_t i = 0; i < in_split.inner; ++i) {
                 po[(o * out_split.axis + axis_offset + a) * out_split.inner + i] =
                     pi[(o * in_split.axis + a) * in_split.inner + i];
               }
             }
           }
           axis_offset += in_split.axis;
         }
       });
     }});

// ---- split ----

// The pieces' lengths along the axis, with a -1 resolved to what the others leave.
std::vector<int64_t> resolve_split_sizes(const InferContext& ctx, int64_t length, int axis) {
  std::vector<int64_t> sizes = ctx.attrs.get_ints("sizes");
  const std::string listed = fmt::format("[{}]", fmt::join(sizes, ", "));
  if (sizes.empty()) ctx.fail("sizes is empty: at least one piece is needed");
  int unknown = -1;
  int64_t known = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      if (unknown >= 0) ctx.fail(fmt::format("sizes {} has more than one -1", listed));
      unknown = static_cast<int>(i);
    } else if (sizes[i] < 0) {
      ctx.fail(fmt::format("sizes {} has the negative size {}; only -1 (the rest of the axis) is allowed", listed,
                           sizes[i]));
    } else {
      known += sizes[i];
    }
  }
  const std::string axis_text =
      fmt::format("axis {} of {} has length {}", axis, ctx.inputs[0].shape.to_string(), length);
  if (unknown >= 0) {
    if (known > length) ctx.fail(fmt::format("sizes {} need at least {} but {}", listed, known, axis_text));
    sizes[static_cast<size_t>(unknown)] = length - known;
  } else if (known != length) {
    ctx.fail(fmt::format("sizes {} sum to {} but {}", listed, known, axis_text),
             fmt::format("make the sizes sum to {}, or write -1 for one piece to take the rest", length));
  }
  return sizes;
}

const OpSchema& kSplit = define_op({
    .name = "split",
    .summary = "cut a tensor into pieces of the given sizes along an axis (one size may be -1)",
    .kind = OpKind::kShape,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 1,
    .infer =
        [](const InferContext& ctx) {
          const TensorSpec& x = ctx.inputs[0];
          if (x.shape.rank() == 0) ctx.fail("cannot split a scalar");
          const int axis = normalize_axis(ctx.attrs.get_int("axis"), x.shape.rank(), "split");
          std::vector<TensorSpec> pieces;
          for (int64_t size : resolve_split_sizes(ctx, x.shape.dims()[axis], axis)) {
            Shape shape = x.shape;
            shape[axis] = size;
            pieces.push_back({shape, x.dtype});
          }
          return pieces;
        },
    .gradient =
        [](const GradContext& ctx) {
          // Pieces that received no gradient contribute zeros.
          std::vector<Tensor> grads;
          for (size_t i = 0; i < ctx.outputs.size(); ++i) grads.push_back(ctx.grad_output(static_cast<int>(i)));
          return std::vector<Tensor>{concat(grads, ctx.attrs.get_int("axis"))};
        },
});

// x (outer, sum of axis_i, inner) -> pieces (outer, axis_i, inner)
const bool kSplitReference = register_kernel(
    "split",
    {.name = kReferenceKernel, .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)}, .fn = [](KernelContext& ctx) {
       const Tensor& x = ctx.inputs[0];
       const int axis = normalize_axis(ctx.attrs.get_int("axis"), x.rank(), "split");
       const AxisSplit in_split(x.shape(), axis);
       visit_dtype(x.dtype(), [&]<typename T>() {
         const T* px = static_cast<const T*>(x.raw_data());
         int64_t axis_offset = 0;
         for (Tensor& piece : ctx.outputs) {
           const AxisSplit out_split(piece.shape(), axis);
           T* po = static_cast<T*>(piece.raw_data());
           for (int64_t o = 0; o < out_split.outer; ++o) {
             for (int64_t a = 0; a < out_split.axis; ++a) {
               for (int64_t i = 0; i < out_split.inner; ++i) {
                 po[(o * out_split.axis + a) * out_split.inner + i] =
                     px[(o * in_split.axis + axis_offset + a) * in_split.inner + i];
               }
             }
           }
           axis_offset += out_split.axis;
         }
       });
     }});

}  // namespace

Tensor concat(const std::vector<Tensor>& tensors, int64_t axis) {
  return call_op(kConcat, std::span<const Tensor>(tensors), Attrs{{"axis", axis}})[0];
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t axis) {
  return call_op(kSplit, {x}, Attrs{{"sizes", sizes}, {"axis", axis}});
}

}  // namespace nimbus
