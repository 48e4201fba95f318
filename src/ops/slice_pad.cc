// slice (a box of a tensor) and pad (a tensor inside a larger box filled with
// a constant): each is the other's gradient.
#include <fmt/format.h>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/registry.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus {
namespace {

// The flat offset in `outer` of flat element `flat` of `inner`, when inner's
// element [c0, c1, ...] sits at outer's [c0 + shift0, c1 + shift1, ...].
int64_t shifted_offset(int64_t flat, const Shape& inner, const Shape& outer, const std::vector<int64_t>& shift) {
  const auto outer_strides = outer.strides();
  int64_t offset = 0;
  for (int d = inner.rank() - 1; d >= 0; --d) {
    const int64_t coordinate = flat % inner.dims()[d];
    flat /= inner.dims()[d];
    offset += (coordinate + shift[static_cast<size_t>(d)]) * outer_strides[static_cast<size_t>(d)];
  }
  return offset;
}

// ---- slice ----

const OpSchema& kSlice = define_op({
    .name = "slice",
    .summary = "the box starting at begin with extent size per axis (size -1: to the end)",
    .kind = OpKind::kShape,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 1,
    .infer =
        [](const InferContext& ctx) {
          const Shape& in = ctx.inputs[0].shape;
          const std::vector<int64_t>& begin = ctx.attrs.get_ints("begin");
          const std::vector<int64_t>& size = ctx.attrs.get_ints("size");
          if (std::ssize(begin) != in.rank() || std::ssize(size) != in.rank()) {
            ctx.fail(fmt::format("begin [{}] and size [{}] need one entry per axis of {} (rank {})",
                                 fmt::join(begin, ", "), fmt::join(size, ", "), in.to_string(), in.rank()));
          }
          Shape out;
          for (int d = 0; d < in.rank(); ++d) {
            const int64_t start = begin[static_cast<size_t>(d)], extent = size[static_cast<size_t>(d)];
            const int64_t length = in.dims()[d];
            if (start < 0) {
              ctx.fail(fmt::format("begin[{}] = {} is negative for {}", d, start, in.to_string()),
                       fmt::format("begin counts from the start of the axis: the last n elements of axis {} start "
                                   "at {} - n",
                                   d, length));
            }
            if (start > length) {
              ctx.fail(fmt::format("begin[{}] = {} is past the end of axis {} of {} (length {})", d, start, d,
                                   in.to_string(), length));
            }
            if (extent < -1) {
              ctx.fail(
                  fmt::format("size[{}] = {} is negative; only -1 (to the end of the axis) is allowed", d, extent));
            }
            const int64_t end = extent == -1 ? length : start + extent;
            if (end > length) {
              ctx.fail(fmt::format("slice [{}, {}) of axis {} is out of bounds for {} (axis length {})", start, end, d,
                                   in.to_string(), length),
                       "size -1 takes the rest of the axis");
            }
            out.push_back(end - start);
          }
          return std::vector<TensorSpec>{{out, ctx.inputs[0].dtype}};
        },
    .gradient =
        [](const GradContext& ctx) {
          const Shape& in = ctx.inputs[0].shape();
          const Shape& out = ctx.outputs[0].shape();
          const std::vector<int64_t>& begin = ctx.attrs.get_ints("begin");
          std::vector<std::pair<int64_t, int64_t>> paddings;
          for (int d = 0; d < in.rank(); ++d) {
            const int64_t before = begin[static_cast<size_t>(d)];
            paddings.emplace_back(before, in.dims()[d] - before - out.dims()[d]);
          }
          return std::vector<Tensor>{pad(ctx.grad_output(0), paddings, 0.0)};
        },
});

// x (...) -> out (...): out[c] = x[c + begin]
const bool kSliceReference = register_kernel(
    "slice",
    {.name = kReferenceKernel, .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)}, .fn = [](KernelContext& ctx) {
       const Tensor& x = ctx.inputs[0];
       Tensor& out = ctx.outputs[0];
       const std::vector<int64_t>& begin = ctx.attrs.get_ints("begin");
       visit_dtype(x.dtype(), [&]<typename T>() {
         const T* px = static_cast<const T*>(x.raw_data());
         T* po = static_cast<T*>(out.raw_data());
         for (int64_t i = 0; i < out.numel(); ++i) po[i] = px[shifted_offset(i, out.shape(), x.shape(), begin)];
       });
     }});

// ---- pad ----

// paddings = [before0, after0, before1, after1, ...]
std::vector<int64_t> paddings_before(const std::vector<int64_t>& paddings) {
  std::vector<int64_t> before;
  for (size_t i = 0; i < paddings.size(); i += 2) before.push_back(paddings[i]);
  return before;
}

const OpSchema& kPad = define_op({
    .name = "pad",
    .summary = "surround with `value`: paddings (before, after) per axis",
    .kind = OpKind::kShape,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 1,
    .infer =
        [](const InferContext& ctx) {
          const Shape& in = ctx.inputs[0].shape;
          const std::vector<int64_t>& paddings = ctx.attrs.get_ints("paddings");
          if (std::ssize(paddings) != 2 * in.rank()) {
            ctx.fail(fmt::format("paddings [{}] need a (before, after) pair per axis of {}: {} numbers, got {}",
                                 fmt::join(paddings, ", "), in.to_string(), 2 * in.rank(), paddings.size()));
          }
          Shape out;
          for (int d = 0; d < in.rank(); ++d) {
            const size_t pair = 2 * static_cast<size_t>(d);
            const int64_t before = paddings[pair], after = paddings[pair + 1];
            if (before < 0 || after < 0) {
              ctx.fail(
                  fmt::format("paddings ({}, {}) of axis {} are negative for {}", before, after, d, in.to_string()),
                  "use slice to remove elements");
            }
            out.push_back(in.dims()[d] + before + after);
          }
          return std::vector<TensorSpec>{{out, ctx.inputs[0].dtype}};
        },
    .gradient =
        [](const GradContext& ctx) {
          return std::vector<Tensor>{slice(ctx.grad_output(0), paddings_before(ctx.attrs.get_ints("paddings")),
                                           ctx.inputs[0].shape().to_vector())};
        },
});

// x (...) -> out (...): out[c + before] = x[c], every other element `value`
const bool kPadReference = register_kernel(
    "pad",
    {.name = kReferenceKernel, .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)}, .fn = [](KernelContext& ctx) {
       const Tensor& x = ctx.inputs[0];
       Tensor& out = ctx.outputs[0];
       const std::vector<int64_t> before = paddings_before(ctx.attrs.get_ints("paddings"));
       visit_dtype(x.dtype(), [&]<typename T>() {
         const T* px = static_cast<const T*>(x.raw_data());
         T* po = static_cast<T*>(out.raw_data());
         const T value = from_double<T>(ctx.attrs.get_float("value"));
         for (int64_t i = 0; i < out.numel(); ++i) po[i] = value;
         for (int64_t i = 0; i < x.numel(); ++i) po[shifted_offset(i, x.shape(), out.shape(), before)] = px[i];
       });
     }});

}  // namespace

Tensor slice(const Tensor& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& size) {
  return call_op1(kSlice, {x}, Attrs{{"begin", begin}, {"size", size}});
}

Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& paddings, double value) {
  std::vector<int64_t> flat;
  for (const auto& [before, after] : paddings) {
    flat.push_back(before);
    flat.push_back(after);
  }
  return call_op1(kPad, {x}, Attrs{{"paddings", flat}, {"value", value}});
}

}  // namespace nimbus
