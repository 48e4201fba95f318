// transpose (permute axes, materialized) and broadcast_to.
#include <fmt/format.h>

#include <numeric>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/for_kernels/kernel_util.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/registry.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus {
namespace {

std::vector<int64_t> inverse_permutation(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return inverse;
}

const OpSchema& kTranspose = define_op({
    .name = "transpose",
    .summary = "permute axes: output axis i is input axis perm[i]",
    .kind = OpKind::kShape,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 1,
    .infer =
        [](const InferContext& ctx) {
          const Shape& in = ctx.inputs[0].shape;
          const std::vector<int64_t>& perm = ctx.attrs.get_ints("perm");
          std::vector<bool> seen(static_cast<size_t>(in.rank()), false);
          bool valid = static_cast<int>(perm.size()) == in.rank();
          for (size_t i = 0; valid && i < perm.size(); ++i) {
            valid = perm[i] >= 0 && perm[i] < in.rank() && !seen[static_cast<size_t>(perm[i])];
            if (valid) seen[static_cast<size_t>(perm[i])] = true;
          }
          if (!valid) {
            ctx.fail(fmt::format("perm [{}] is not a permutation of the {} axes of {}", fmt::join(perm, ", "),
                                 in.rank(), in.to_string()));
          }
          Shape out;
          for (int64_t axis : perm) out.push_back(in.dims()[static_cast<size_t>(axis)]);
          return std::vector<TensorSpec>{{out, ctx.inputs[0].dtype}};
        },
    .gradient =
        [](const GradContext& ctx) {
          return std::vector<Tensor>{transpose(ctx.grad_output(0), inverse_permutation(ctx.attrs.get_ints("perm")))};
        },
});

const bool kTransposeReference = register_kernel(
    "transpose",
    {.name = kReferenceKernel, .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)}, .fn = [](KernelContext& ctx) {
       const Tensor& x = ctx.inputs[0];
       const Tensor& out = ctx.outputs[0];
       const std::vector<int64_t>& perm = ctx.attrs.get_ints("perm");
       // Output axis i walks input axis perm[i].
       const auto in_strides = x.shape().strides();
       std::array<int64_t, kMaxRank> strides{};
       for (size_t i = 0; i < perm.size(); ++i) strides[i] = in_strides[static_cast<size_t>(perm[i])];
       visit_dtype(x.dtype(), [&]<typename T>() {
         const T* px = static_cast<const T*>(x.raw_data());
         T* po = static_cast<T*>(out.raw_data());
         for (int64_t i = 0; i < out.numel(); ++i) {
           po[i] = px[internal::broadcast_offset(i, out.shape(), strides)];
         }
       });
     }});

const OpSchema& kBroadcastTo = define_op({
    .name = "broadcast_to",
    .summary = "repeat size-1 and missing leading axes to a shape",
    .kind = OpKind::kShape,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 1,
    .infer =
        [](const InferContext& ctx) {
          const Shape& target = ctx.attrs.get_shape("shape");
          if (broadcast_shapes(ctx.inputs[0].shape, target, "broadcast_to") != target) {
            ctx.fail(fmt::format("{} cannot be broadcast to {}", ctx.inputs[0].shape.to_string(), target.to_string()),
                     "broadcast_to only adds leading axes and stretches axes of size 1");
          }
          return std::vector<TensorSpec>{{target, ctx.inputs[0].dtype}};
        },
    .gradient =
        [](const GradContext& ctx) {
          return std::vector<Tensor>{reduce_to_shape(ctx.grad_output(0), ctx.inputs[0].shape())};
        },
});

const bool kBroadcastToReference = register_kernel(
    "broadcast_to",
    {.name = kReferenceKernel, .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)}, .fn = [](KernelContext& ctx) {
       const Tensor& x = ctx.inputs[0];
       const Tensor& out = ctx.outputs[0];
       const auto strides = internal::broadcast_strides(x.shape(), out.shape());
       visit_dtype(x.dtype(), [&]<typename T>() {
         const T* px = static_cast<const T*>(x.raw_data());
         T* po = static_cast<T*>(out.raw_data());
         for (int64_t i = 0; i < out.numel(); ++i) {
           po[i] = px[internal::broadcast_offset(i, out.shape(), strides)];
         }
       });
     }});

}  // namespace

Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm) {
  std::vector<int64_t> normalized;
  normalized.reserve(perm.size());
  // Axes below -rank stay as given, so that the error names what the caller wrote.
  for (int64_t axis : perm) normalized.push_back(axis < 0 && axis >= -x.rank() ? axis + x.rank() : axis);
  std::vector<int64_t> identity(static_cast<size_t>(x.rank()));
  std::iota(identity.begin(), identity.end(), 0);
  if (normalized == identity) return x;
  return call_op1(kTranspose, {x}, Attrs{{"perm", normalized}});
}

Tensor matrix_transpose(const Tensor& x) {
  if (x.rank() < 2) {
    throw InvalidArgument(fmt::format("matrix_transpose: needs rank 2 or more, got {}", x.shape().to_string()));
  }
  std::vector<int64_t> perm(static_cast<size_t>(x.rank()));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return transpose(x, perm);
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  return call_op1(kBroadcastTo, {x}, Attrs{{"shape", shape}});
}

}  // namespace nimbus
