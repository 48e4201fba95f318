// conv2d and its two gradients, conv2d_backward_input and
// conv2d_backward_filter, which are ops of their own so that backends can
// give each a fast kernel (oneDNN has one primitive per direction).
#include <fmt/format.h>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/for_kernels/elementwise_defs.h"
#include "nimbus/ops/for_kernels/window_geometry.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/registry.h"

namespace nimbus {
namespace {

using internal::Conv2dGeometry;

void check_operands(const InferContext& ctx) {
  ctx.expect_floating(0);
  ctx.expect_same_dtype(0, 1);
}

void check_grad_y(const InferContext& ctx, const Conv2dGeometry& g, const Shape& input_shape,
                  const Shape& filter_shape) {
  const Shape& grad_y = ctx.inputs[0].shape;
  if (grad_y != g.output.shape()) {
    ctx.fail(fmt::format("grad_y has shape {}, but conv2d of an input {} with a filter {} gives {}", grad_y.to_string(),
                         input_shape.to_string(), filter_shape.to_string(), g.output.shape().to_string()),
             "pass the gradient of conv2d's output and the same options as the forward call");
  }
}

Attrs with_shape(const Attrs& attrs, const char* name, const Shape& shape) {
  Attrs result = attrs;
  result.set(name, shape);
  return result;
}

const OpSchema& kConv2dBackwardInput = define_op({
    .name = "conv2d_backward_input",
    .summary = "the gradient of conv2d w.r.t. its input, from (grad_y, filter) and the input's shape",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kComputeDType,
    .widen_16_bit = true,
    .num_inputs = 2,
    .infer =
        [](const InferContext& ctx) {
          check_operands(ctx);
          const Shape& input_shape = ctx.attrs.get_shape("input_shape");
          const Conv2dGeometry g(input_shape, ctx.inputs[1].shape, ctx.attrs, ctx.op.name);
          check_grad_y(ctx, g, input_shape, ctx.inputs[1].shape);
          return std::vector<TensorSpec>{{input_shape, ctx.inputs[0].dtype}};
        },
    .differentiable = false,
});

const OpSchema& kConv2dBackwardFilter = define_op({
    .name = "conv2d_backward_filter",
    .summary = "the gradient of conv2d w.r.t. its filter, from (grad_y, x) and the filter's shape",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kComputeDType,
    .widen_16_bit = true,
    .num_inputs = 2,
    .infer =
        [](const InferContext& ctx) {
          check_operands(ctx);
          const Shape& filter_shape = ctx.attrs.get_shape("filter_shape");
          const Conv2dGeometry g(ctx.inputs[1].shape, filter_shape, ctx.attrs, ctx.op.name);
          check_grad_y(ctx, g, ctx.inputs[1].shape, filter_shape);
          return std::vector<TensorSpec>{{filter_shape, ctx.inputs[0].dtype}};
        },
    .differentiable = false,
});

const OpSchema& kConv2d = define_op({
    .name = "conv2d",
    .summary = "2-D convolution (cross-correlation) with strides, same/valid padding, dilations and groups",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kComputeDType,
    .widen_16_bit = true,
    .num_inputs = 2,
    .infer =
        [](const InferContext& ctx) {
          check_operands(ctx);
          const Conv2dGeometry g(ctx.inputs[0].shape, ctx.inputs[1].shape, ctx.attrs, ctx.op.name);
          return std::vector<TensorSpec>{{g.output.shape(), ctx.inputs[0].dtype}};
        },
    .gradient =
        [](const GradContext& ctx) {
          const Tensor& x = ctx.inputs[0];
          const Tensor& filter = ctx.inputs[1];
          const Tensor g = ctx.grad_output(0);
          Tensor grad_x, grad_filter;
          if (ctx.needs(0)) {
            grad_x = call_op1(kConv2dBackwardInput, {g, filter}, with_shape(ctx.attrs, "input_shape", x.shape()));
          }
          if (ctx.needs(1)) {
            grad_filter =
                call_op1(kConv2dBackwardFilter, {g, x}, with_shape(ctx.attrs, "filter_shape", filter.shape()));
          }
          return std::vector<Tensor>{grad_x, grad_filter};
        },
});

// Calls visit(x_offset, filter_offset, y_offset) for every product that
// conv2d sums: y[n, oy, ox, f] += x[n, iy, ix, c] * filter[ky, kx, c - group start, f]
// with iy = oy * stride - pad_top + ky * dilation (and likewise ix), taps in the padding skipped.
// The three reference kernels are this one loop with the sum moved to another operand.
template <typename Visit>
void for_each_product(const Conv2dGeometry& g, Visit visit) {
  const int64_t cg = g.channels_per_group(), fg = g.filters_per_group();
  for (int64_t n = 0; n < g.input.batch; ++n) {
    for (int64_t group = 0; group < g.groups; ++group) {
      for (int64_t f = group * fg; f < (group + 1) * fg; ++f) {
        for (int64_t oy = 0; oy < g.rows.output; ++oy) {
          for (int64_t ox = 0; ox < g.cols.output; ++ox) {
            const int64_t y_offset = g.output.offset(n, oy, ox, f);
            for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
              const int64_t iy = g.rows.input_index(oy, ky);
              if (iy < 0 || iy >= g.input.height) continue;
              for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
                const int64_t ix = g.cols.input_index(ox, kx);
                if (ix < 0 || ix >= g.input.width) continue;
                for (int64_t ci = 0; ci < cg; ++ci) {
                  visit(g.input.offset(n, iy, ix, group * cg + ci), g.filter_offset(ky, kx, ci, f), y_offset);
                }
              }
            }
          }
        }
      }
    }
  }
}

// Stores sums accumulated in double into `out`.
template <typename T>
void store_all(const std::vector<double>& sums, Tensor& out) {
  T* po = static_cast<T*>(out.raw_data());
  for (size_t i = 0; i < sums.size(); ++i) po[i] = from_double<T>(sums[i]);
}

const std::vector<DType> kConvDTypes = internal::dtype_list(internal::kFloatingDTypes);

// x (N,H,W,C) | (N,C,H,W), filter (KH,KW,C/G,F) | (F,C/G,KH,KW) -> y (N,OH,OW,F) | (N,F,OH,OW)
const bool kConv2dReference =
    register_kernel("conv2d", {.name = kReferenceKernel, .dtypes = kConvDTypes, .fn = [](KernelContext& ctx) {
                                 const Tensor& x = ctx.inputs[0];
                                 const Conv2dGeometry g(x.shape(), ctx.inputs[1].shape(), ctx.attrs, ctx.op.name);
                                 std::vector<double> y(static_cast<size_t>(ctx.outputs[0].numel()), 0.0);
                                 visit_dtype(x.dtype(), [&]<typename T>() {
                                   const T* px = static_cast<const T*>(x.raw_data());
                                   const T* pw = static_cast<const T*>(ctx.inputs[1].raw_data());
                                   for_each_product(g, [&](int64_t xi, int64_t wi, int64_t yi) {
                                     y[static_cast<size_t>(yi)] += to_double(px[xi]) * to_double(pw[wi]);
                                   });
                                   store_all<T>(y, ctx.outputs[0]);
                                 });
                               }});

// grad_y (N,OH,OW,F), filter (KH,KW,C/G,F) -> grad_x (N,H,W,C); NCHW alike.
const bool kConv2dBackwardInputReference = register_kernel(
    "conv2d_backward_input", {.name = kReferenceKernel, .dtypes = kConvDTypes, .fn = [](KernelContext& ctx) {
                                const Tensor& grad_y = ctx.inputs[0];
                                const Conv2dGeometry g(ctx.attrs.get_shape("input_shape"), ctx.inputs[1].shape(),
                                                       ctx.attrs, ctx.op.name);
                                std::vector<double> grad_x(static_cast<size_t>(ctx.outputs[0].numel()), 0.0);
                                visit_dtype(grad_y.dtype(), [&]<typename T>() {
                                  const T* pg = static_cast<const T*>(grad_y.raw_data());
                                  const T* pw = static_cast<const T*>(ctx.inputs[1].raw_data());
                                  for_each_product(g, [&](int64_t xi, int64_t wi, int64_t yi) {
                                    grad_x[static_cast<size_t>(xi)] += to_double(pg[yi]) * to_double(pw[wi]);
                                  });
                                  store_all<T>(grad_x, ctx.outputs[0]);
                                });
                              }});

// grad_y (N,OH,OW,F), x (N,H,W,C) -> grad_filter (KH,KW,C/G,F); NCHW alike.
const bool kConv2dBackwardFilterReference = register_kernel(
    "conv2d_backward_filter", {.name = kReferenceKernel, .dtypes = kConvDTypes, .fn = [](KernelContext& ctx) {
                                 const Tensor& grad_y = ctx.inputs[0];
                                 const Conv2dGeometry g(ctx.inputs[1].shape(), ctx.attrs.get_shape("filter_shape"),
                                                        ctx.attrs, ctx.op.name);
                                 std::vector<double> grad_w(static_cast<size_t>(ctx.outputs[0].numel()), 0.0);
                                 visit_dtype(grad_y.dtype(), [&]<typename T>() {
                                   const T* pg = static_cast<const T*>(grad_y.raw_data());
                                   const T* px = static_cast<const T*>(ctx.inputs[1].raw_data());
                                   for_each_product(g, [&](int64_t xi, int64_t wi, int64_t yi) {
                                     grad_w[static_cast<size_t>(wi)] += to_double(pg[yi]) * to_double(px[xi]);
                                   });
                                   store_all<T>(grad_w, ctx.outputs[0]);
                                 });
                               }});

Attrs conv_attrs(const Conv2dOptions& options) {
  return Attrs{{"strides", std::vector<int64_t>(options.strides.begin(), options.strides.end())},
               {"padding", options.padding},
               {"dilations", std::vector<int64_t>(options.dilations.begin(), options.dilations.end())},
               {"groups", options.groups},
               {"data_format", options.data_format}};
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& filter, const Conv2dOptions& options) {
  return call_op1(kConv2d, {x, filter}, conv_attrs(options));
}

Tensor conv2d_backward_input(const Tensor& grad_y, const Tensor& filter, const Shape& input_shape,
                             const Conv2dOptions& options) {
  return call_op1(kConv2dBackwardInput, {grad_y, filter}, with_shape(conv_attrs(options), "input_shape", input_shape));
}

Tensor conv2d_backward_filter(const Tensor& grad_y, const Tensor& x, const Shape& filter_shape,
                              const Conv2dOptions& options) {
  return call_op1(kConv2dBackwardFilter, {grad_y, x}, with_shape(conv_attrs(options), "filter_shape", filter_shape));
}

}  // namespace nimbus
