// reshape (a view of the same data) and the composites built on it:
// expand_dims, squeeze, flatten.
#include <fmt/format.h>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/for_kernels/copy.h"
#include "nimbus/ops/registry.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus {
namespace {

const OpSchema& kReshape = define_op({
    .name = "reshape",
    .summary = "same elements, new shape (a view)",
    .kind = OpKind::kShape,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 1,
    .infer =
        [](const InferContext& ctx) {
          const Shape& target = ctx.attrs.get_shape("shape");
          if (target.numel() != ctx.inputs[0].shape.numel()) {
            ctx.fail(fmt::format("cannot reshape {} ({} elements) to {} ({} elements)", ctx.inputs[0].shape.to_string(),
                                 ctx.inputs[0].shape.numel(), target.to_string(), target.numel()));
          }
          return std::vector<TensorSpec>{{target, ctx.inputs[0].dtype}};
        },
    .gradient =
        [](const GradContext& ctx) { return std::vector<Tensor>{reshape(ctx.grad_output(0), ctx.inputs[0].shape())}; },
    .output_aliases_input = true,
});

const bool kReshapeReference = register_kernel("reshape", {.name = kReferenceKernel,
                                                           .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)},
                                                           .fn = internal::copy_if_distinct});

// Resolves one -1 dimension from the element count.
Shape resolve_shape(const Shape& input, const std::vector<int64_t>& dims) {
  int unknown = -1;
  int64_t known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (unknown >= 0) {
        throw InvalidArgument(fmt::format("reshape: target [{}] has more than one -1", fmt::join(dims, ", ")));
      }
      unknown = static_cast<int>(i);
    } else if (dims[i] < 0) {
      throw InvalidArgument(fmt::format("reshape: target [{}] has a negative dimension", fmt::join(dims, ", ")));
    } else {
      known *= dims[i];
    }
  }
  std::vector<int64_t> resolved = dims;
  if (unknown >= 0) {
    if (known == 0 || input.numel() % known != 0) {
      throw InvalidArgument(fmt::format("reshape: cannot reshape {} ({} elements) to [{}]", input.to_string(),
                                        input.numel(), fmt::join(dims, ", ")));
    }
    resolved[static_cast<size_t>(unknown)] = input.numel() / known;
  }
  return Shape(resolved);
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  return call_op1(kReshape, {x}, Attrs{{"shape", shape}});
}

Tensor reshape(const Tensor& x, const std::vector<int64_t>& shape) {
  return reshape(x, resolve_shape(x.shape(), shape));
}

Tensor expand_dims(const Tensor& x, int64_t axis) {
  const int position = normalize_axis(axis, x.rank() + 1, "expand_dims");
  std::vector<int64_t> dims = x.shape().to_vector();
  dims.insert(dims.begin() + position, 1);
  return reshape(x, Shape(dims));
}

Tensor squeeze(const Tensor& x, const std::vector<int64_t>& axes) {
  const std::vector<int> chosen = normalize_axes(axes, x.rank(), "squeeze");
  std::vector<int64_t> dims;
  for (int axis = 0; axis < x.rank(); ++axis) {
    const bool listed = std::find(chosen.begin(), chosen.end(), axis) != chosen.end();
    const int64_t dim = x.shape().dims()[axis];
    if (listed && dim == 1) continue;
    if (listed && !axes.empty()) {
      throw InvalidArgument(fmt::format("squeeze: axis {} of {} has size {}, not 1", axis, x.shape().to_string(), dim));
    }
    dims.push_back(dim);
  }
  return reshape(x, Shape(dims));
}

Tensor flatten(const Tensor& x) {
  if (x.rank() == 0) throw InvalidArgument("flatten: a scalar has no batch axis to keep");
  return reshape(x, std::vector<int64_t>{x.dim(0), -1});
}

Tensor Tensor::reshape(const Shape& shape) const { return nimbus::reshape(*this, shape); }

}  // namespace nimbus
