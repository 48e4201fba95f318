// max_pool2d and avg_pool2d, and their gradients max_pool2d_backward and
// avg_pool2d_backward (ops of their own, so backends can give them fast
// kernels). Padding follows TF: padded taps never win a max and are not
// counted by an average.
#include <fmt/format.h>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/for_kernels/elementwise_defs.h"
#include "nimbus/ops/for_kernels/window_geometry.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/registry.h"

namespace nimbus {
namespace {

using internal::Pool2dGeometry;

std::vector<TensorSpec> infer_pool(const InferContext& ctx) {
  ctx.expect_floating(0);
  const Pool2dGeometry g(ctx.inputs[0].shape, ctx.attrs, ctx.op.name);
  return {{g.output.shape(), ctx.inputs[0].dtype}};
}

// grad_y must be shaped like the pooling of `input_shape`.
void check_grad_y(const InferContext& ctx, const Pool2dGeometry& g, const Shape& input_shape) {
  if (ctx.inputs[0].shape != g.output.shape()) {
    ctx.fail(fmt::format("grad_y has shape {}, but pooling an input {} gives {}", ctx.inputs[0].shape.to_string(),
                         input_shape.to_string(), g.output.shape().to_string()),
             "pass the gradient of the pooling's output and the same options as the forward call");
  }
}

const OpSchema& kMaxPoolBackward = define_op({
    .name = "max_pool2d_backward",
    .summary = "the gradient of max_pool2d: each window's gradient goes to its first maximum in x",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 2,
    .infer =
        [](const InferContext& ctx) {
          ctx.expect_floating(0);
          ctx.expect_same_dtype(0, 1);
          const Pool2dGeometry g(ctx.inputs[1].shape, ctx.attrs, ctx.op.name);
          check_grad_y(ctx, g, ctx.inputs[1].shape);
          return std::vector<TensorSpec>{ctx.inputs[1]};
        },
    .differentiable = false,
});

// Graph fusion (src/graph/passes/pool_relu_gradient.cc) makes it from max_pool2d_backward and relu's gradient
// where(x > 0, ·, 0): one pass over the image instead of two.
// Its second output is the first summed over all but the channel axis: the bias gradient of the convolution
// that computed z, which the kernel adds up while the gradient is in cache.
const OpSchema& kMaxPoolReluBackward = define_op({
    .name = "max_pool2d_relu_backward",
    .summary = "max_pool2d_backward(grad_y, x) where x > 0, else 0: the gradient through max_pool2d(relu(z)) to z, "
               "from x = relu(z); and that gradient summed per channel",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 2,
    .infer =
        [](const InferContext& ctx) {
          std::vector<TensorSpec> outputs = kMaxPoolBackward.infer(ctx);
          const Pool2dGeometry g(ctx.inputs[1].shape, ctx.attrs, ctx.op.name);
          outputs.push_back({Shape{g.input.channels}, ctx.inputs[1].dtype});
          return outputs;
        },
    .differentiable = false,
});

const OpSchema& kAvgPoolBackward = define_op({
    .name = "avg_pool2d_backward",
    .summary = "the gradient of avg_pool2d, from grad_y and the input's shape",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 1,
    .infer =
        [](const InferContext& ctx) {
          ctx.expect_floating(0);
          const Shape& input_shape = ctx.attrs.get_shape("input_shape");
          const Pool2dGeometry g(input_shape, ctx.attrs, ctx.op.name);
          check_grad_y(ctx, g, input_shape);
          return std::vector<TensorSpec>{{input_shape, ctx.inputs[0].dtype}};
        },
    .differentiable = false,
});

const OpSchema& kMaxPool = define_op({
    .name = "max_pool2d",
    .summary = "maximum over 2-D windows (padded taps excluded)",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 1,
    .infer = infer_pool,
    .gradient =
        [](const GradContext& ctx) {
          return std::vector<Tensor>{call_op1(kMaxPoolBackward, {ctx.grad_output(0), ctx.inputs[0]}, ctx.attrs)};
        },
});

const OpSchema& kAvgPool = define_op({
    .name = "avg_pool2d",
    .summary = "mean over 2-D windows, dividing by the taps inside the input (TF's rule for padding same)",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kFollowInputs,
    .widen_16_bit = true,
    .num_inputs = 1,
    .infer = infer_pool,
    .gradient =
        [](const GradContext& ctx) {
          Attrs attrs = ctx.attrs;
          attrs.set("input_shape", ctx.inputs[0].shape());
          return std::vector<Tensor>{call_op1(kAvgPoolBackward, {ctx.grad_output(0)}, attrs)};
        },
});

// Calls visit(y_offset, taps) for every output element, with taps the
// offsets in x of its window's elements inside the image, in row-major
// window order.
template <typename Visit>
void for_each_window(const Pool2dGeometry& g, Visit visit) {
  std::vector<int64_t> taps;
  for (int64_t n = 0; n < g.input.batch; ++n) {
    for (int64_t c = 0; c < g.input.channels; ++c) {
      for (int64_t oy = 0; oy < g.rows.output; ++oy) {
        for (int64_t ox = 0; ox < g.cols.output; ++ox) {
          taps.clear();
          for (int64_t ky = 0; ky < g.rows.kernel; ++ky) {
            const int64_t iy = g.rows.input_index(oy, ky);
            if (iy < 0 || iy >= g.input.height) continue;
            for (int64_t kx = 0; kx < g.cols.kernel; ++kx) {
              const int64_t ix = g.cols.input_index(ox, kx);
              if (ix >= 0 && ix < g.input.width) taps.push_back(g.input.offset(n, iy, ix, c));
            }
          }
          visit(g.output.offset(n, oy, ox, c), taps);
        }
      }
    }
  }
}

// The tap holding the window's first maximum (TF's "same" rule keeps every window non-empty).
template <typename T>
int64_t first_max(const T* x, const std::vector<int64_t>& taps) {
  int64_t best = taps.front();
  for (int64_t tap : taps) {
    if (to_double(x[tap]) > to_double(x[best])) best = tap;
  }
  return best;
}

const std::vector<DType> kPoolDTypes = internal::dtype_list(internal::kFloatingDTypes);

// x (N,H,W,C) | (N,C,H,W) -> y (N,OH,OW,C) | (N,C,OH,OW)
const bool kMaxPoolReference = register_kernel(
    "max_pool2d", {.name = kReferenceKernel, .dtypes = kPoolDTypes, .fn = [](KernelContext& ctx) {
                     const Pool2dGeometry g(ctx.inputs[0].shape(), ctx.attrs, ctx.op.name);
                     visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
                       const T* px = static_cast<const T*>(ctx.inputs[0].raw_data());
                       T* py = static_cast<T*>(ctx.outputs[0].raw_data());
                       for_each_window(
                           g, [&](int64_t yi, const std::vector<int64_t>& taps) { py[yi] = px[first_max(px, taps)]; });
                     });
                   }});

const bool kAvgPoolReference =
    register_kernel("avg_pool2d", {.name = kReferenceKernel, .dtypes = kPoolDTypes, .fn = [](KernelContext& ctx) {
                                     const Pool2dGeometry g(ctx.inputs[0].shape(), ctx.attrs, ctx.op.name);
                                     visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
                                       const T* px = static_cast<const T*>(ctx.inputs[0].raw_data());
                                       T* py = static_cast<T*>(ctx.outputs[0].raw_data());
                                       for_each_window(g, [&](int64_t yi, const std::vector<int64_t>& taps) {
                                         double total = 0;
                                         for (int64_t tap : taps) total += to_double(px[tap]);
                                         py[yi] = from_double<T>(total / static_cast<double>(taps.size()));
                                       });
                                     });
                                   }});

// grad_y (N,OH,OW,C), x (N,H,W,C) -> grad_x (N,H,W,C); NCHW alike. With `through_relu`
// (max_pool2d_relu_backward), zero where x <= 0 or NaN, and grad_x summed per channel (C).
void max_pool_backward_reference(KernelContext& ctx, bool through_relu) {
  const Pool2dGeometry g(ctx.inputs[1].shape(), ctx.attrs, ctx.op.name);
  std::vector<double> grad_x(static_cast<size_t>(ctx.outputs[0].numel()), 0.0);
  std::vector<double> channel_sums(static_cast<size_t>(g.input.channels), 0.0);
  const int64_t plane = g.input.height * g.input.width;
  visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
    const T* pg = static_cast<const T*>(ctx.inputs[0].raw_data());
    const T* px = static_cast<const T*>(ctx.inputs[1].raw_data());
    for_each_window(g, [&](int64_t yi, const std::vector<int64_t>& taps) {
      grad_x[static_cast<size_t>(first_max(px, taps))] += to_double(pg[yi]);
    });
    T* out = static_cast<T*>(ctx.outputs[0].raw_data());
    for (size_t i = 0; i < grad_x.size(); ++i) {
      const bool passes = !through_relu || to_double(px[i]) > 0;
      out[i] = from_double<T>(passes ? grad_x[i] : 0.0);
      const int64_t at = static_cast<int64_t>(i);
      const int64_t channel = g.input.channels_last ? at % g.input.channels : at / plane % g.input.channels;
      channel_sums[static_cast<size_t>(channel)] += passes ? grad_x[i] : 0.0;
    }
    if (through_relu) {
      T* sums = static_cast<T*>(ctx.outputs[1].raw_data());
      for (size_t c = 0; c < channel_sums.size(); ++c) sums[c] = from_double<T>(channel_sums[c]);
    }
  });
}

const bool kMaxPoolBackwardReference =
    register_kernel("max_pool2d_backward",
                    {.name = kReferenceKernel,
                     .dtypes = kPoolDTypes,
                     .fn = [](KernelContext& ctx) { max_pool_backward_reference(ctx, /*through_relu=*/false); }}) &&
    register_kernel("max_pool2d_relu_backward",
                    {.name = kReferenceKernel, .dtypes = kPoolDTypes, .fn = [](KernelContext& ctx) {
                       max_pool_backward_reference(ctx, /*through_relu=*/true);
                     }});

// grad_y (N,OH,OW,C) -> grad_x (N,H,W,C) with H, W from input_shape; NCHW alike.
const bool kAvgPoolBackwardReference = register_kernel(
    "avg_pool2d_backward", {.name = kReferenceKernel, .dtypes = kPoolDTypes, .fn = [](KernelContext& ctx) {
                              const Pool2dGeometry g(ctx.attrs.get_shape("input_shape"), ctx.attrs, ctx.op.name);
                              std::vector<double> grad_x(static_cast<size_t>(ctx.outputs[0].numel()), 0.0);
                              visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
                                const T* pg = static_cast<const T*>(ctx.inputs[0].raw_data());
                                for_each_window(g, [&](int64_t yi, const std::vector<int64_t>& taps) {
                                  const double share = to_double(pg[yi]) / static_cast<double>(taps.size());
                                  for (int64_t tap : taps) grad_x[static_cast<size_t>(tap)] += share;
                                });
                                T* out = static_cast<T*>(ctx.outputs[0].raw_data());
                                for (size_t i = 0; i < grad_x.size(); ++i) out[i] = from_double<T>(grad_x[i]);
                              });
                            }});

Attrs pool_attrs(const Pool2dOptions& options) {
  // Stride 0 means "the pool size" (Keras's strides=None); the op always sees explicit strides.
  std::vector<int64_t> strides(options.strides.begin(), options.strides.end());
  for (size_t i = 0; i < strides.size(); ++i) {
    if (strides[i] == 0) strides[i] = options.pool_size[i];
  }
  return Attrs{{"pool_size", std::vector<int64_t>(options.pool_size.begin(), options.pool_size.end())},
               {"strides", strides},
               {"padding", options.padding},
               {"data_format", options.data_format}};
}

}  // namespace

Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options) {
  return call_op1(kMaxPool, {x}, pool_attrs(options));
}
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options) {
  return call_op1(kAvgPool, {x}, pool_attrs(options));
}
Tensor max_pool2d_backward(const Tensor& grad_y, const Tensor& x, const Pool2dOptions& options) {
  return call_op1(kMaxPoolBackward, {grad_y, x}, pool_attrs(options));
}
Tensor avg_pool2d_backward(const Tensor& grad_y, const Shape& input_shape, const Pool2dOptions& options) {
  Attrs attrs = pool_attrs(options);
  attrs.set("input_shape", input_shape);
  return call_op1(kAvgPoolBackward, {grad_y}, attrs);
}

}  // namespace nimbus
