// conv2d, conv2d_backward_input and conv2d_backward_filter on oneDNN.
//
// Activations (x, y and their gradients) stay in the caller's layout, nhwc or
// nchw, so the large tensors are never reordered. The filter is small, and
// its plain layouts (hwio, oihw) push oneDNN onto its gemm implementations
// (backward data measured 20x slower at 128x28x28x32); so each primitive
// picks its own filter layout (format_tag::any) and the filter, or the filter
// gradient, is reordered per call when that layout differs from ours.
// Primitives are created once per geometry and cached. fused_conv2d is the
// forward convolution with a bias operand and an eltwise post-op.
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nimbus/ops/for_kernels/window_geometry.h"
#include "nimbus/ops/registry.h"
#include "src/kernels/cpu/onednn.h"
#include "src/kernels/cpu/onednn_image.h"

namespace nimbus::cpu {
namespace {

using dnnl::memory;
using internal::Conv2dGeometry;

enum class Direction : int64_t { kForward, kBackwardInput, kBackwardFilter };

// A forward convolution's epilogue: none (conv2d), or fused_conv2d's bias and
// activation.
struct Epilogue {
  bool bias = false;
  Activation activation = Activation::kLinear;
};

// oneDNN's logical filter dims: (F, C, KH, KW), or (G, F/G, C/G, KH, KW) with groups.
memory::dims filter_dims(const Conv2dGeometry& g) {
  if (g.groups == 1) return {g.filters, g.filter_channels, g.kernel_h, g.kernel_w};
  return {g.groups, g.filters_per_group(), g.filter_channels, g.kernel_h, g.kernel_w};
}

// Our filter layouts, (KH, KW, C/G, F) for NHWC and (F, C/G, KH, KW) for NCHW,
// as strides over filter_dims; filter f = group * F/G + o.
memory::desc user_filter_desc(const Conv2dGeometry& g, memory::data_type dt) {
  const int64_t cg = g.filter_channels, fg = g.filters_per_group(), kh = g.kernel_h, kw = g.kernel_w;
  // Strides of (group, o, ci, ky, kx).
  const memory::dims strides = g.channels_last ? memory::dims{fg, 1, g.filters, kw * cg * g.filters, cg * g.filters}
                                               : memory::dims{fg * cg * kh * kw, cg * kh * kw, kh * kw, kw, 1};
  const memory::dims used = g.groups == 1 ? memory::dims(strides.begin() + 1, strides.end()) : strides;
  return memory::desc(filter_dims(g), dt, used);
}

struct ConvPrimitive {
  dnnl::primitive primitive;
  memory::desc filter_user, filter;  // our layout and the primitive's
  std::optional<dnnl::reorder> filter_reorder;
};

// Every tensor of one convolution has one dtype (f32, or bf16: dnnl_runs_natively).
const ConvPrimitive& get_conv(Direction direction, const Conv2dGeometry& g, DType dtype,
                              const Epilogue& epilogue = {}) {
  const std::vector<int64_t> key{static_cast<int64_t>(direction),
                                 static_cast<int64_t>(dtype),
                                 epilogue.bias,
                                 static_cast<int64_t>(epilogue.activation),
                                 g.input.batch,
                                 g.input.height,
                                 g.input.width,
                                 g.input.channels,
                                 g.channels_last,
                                 g.kernel_h,
                                 g.kernel_w,
                                 g.filters,
                                 g.groups,
                                 g.rows.stride,
                                 g.cols.stride,
                                 g.rows.dilation,
                                 g.cols.dilation,
                                 g.rows.pad_before,
                                 g.cols.pad_before,
                                 g.rows.pad_after,
                                 g.cols.pad_after};
  const PrimitiveOwner owner = primitive_owner();  // one primitive per thread (onednn.h)
  static std::mutex mutex;
  static std::map<std::pair<PrimitiveOwner, std::vector<int64_t>>, ConvPrimitive> cache;
  std::lock_guard lock(mutex);
  auto it = cache.find({owner, key});
  if (it != cache.end()) return it->second;

  dnnl::engine& engine = dnnl_engine();
  const memory::data_type dt = dnnl_data_type(dtype);
  const memory::desc src = image_desc(g.input, dtype), dst = image_desc(g.output, dtype);
  const memory::desc filter_any(filter_dims(g), dt, memory::format_tag::any);
  const memory::dims strides{g.rows.stride, g.cols.stride};
  // oneDNN counts dilation from 0 (no gaps); ours from 1.
  const memory::dims dilations{g.rows.dilation - 1, g.cols.dilation - 1};
  const memory::dims pad_before{g.rows.pad_before, g.cols.pad_before};
  const memory::dims pad_after{g.rows.pad_after, g.cols.pad_after};
  const auto algorithm = dnnl::algorithm::convolution_direct;

  ConvPrimitive entry;
  entry.filter_user = user_filter_desc(g, dt);
  dnnl::convolution_forward::primitive_desc forward;
  NIMBUS_DNNL_CHECK(forward = dnnl::convolution_forward::primitive_desc(
                        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algorithm, src, filter_any,
                                                        dst, strides, dilations, pad_before, pad_after),
                        engine));
  switch (direction) {
    case Direction::kForward:
      if (epilogue.bias) {
        const memory::desc bias({g.filters}, dt, memory::format_tag::x);
        NIMBUS_DNNL_CHECK(
            forward = dnnl::convolution_forward::primitive_desc(
                dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algorithm, src, filter_any, bias,
                                                dst, strides, dilations, pad_before, pad_after),
                activation_post_op(epilogue.activation), engine));
      }
      entry.filter = forward.weights_desc();
      NIMBUS_DNNL_CHECK(entry.primitive = dnnl::convolution_forward(forward));
      break;
    case Direction::kBackwardInput: {
      dnnl::convolution_backward_data::primitive_desc pd;
      NIMBUS_DNNL_CHECK(pd = dnnl::convolution_backward_data::primitive_desc(
                            dnnl::convolution_backward_data::desc(algorithm, src, filter_any, dst, strides, dilations,
                                                                  pad_before, pad_after),
                            engine, forward));
      entry.filter = pd.weights_desc();
      NIMBUS_DNNL_CHECK(entry.primitive = dnnl::convolution_backward_data(pd));
      break;
    }
    case Direction::kBackwardFilter: {
      dnnl::convolution_backward_weights::primitive_desc pd;
      NIMBUS_DNNL_CHECK(pd = dnnl::convolution_backward_weights::primitive_desc(
                            dnnl::convolution_backward_weights::desc(algorithm, src, filter_any, dst, strides,
                                                                     dilations, pad_before, pad_after),
                            engine, forward));
      entry.filter = pd.diff_weights_desc();
      NIMBUS_DNNL_CHECK(entry.primitive = dnnl::convolution_backward_weights(pd));
      break;
    }
  }
  if (entry.filter != entry.filter_user) {
    const bool to_user = direction == Direction::kBackwardFilter;
    const memory::desc& from = to_user ? entry.filter : entry.filter_user;
    const memory::desc& to = to_user ? entry.filter_user : entry.filter;
    NIMBUS_DNNL_CHECK(entry.filter_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine, from, engine, to)));
  }
  return cache.emplace(std::pair(owner, key), std::move(entry)).first->second;
}

memory wrap(const memory::desc& desc, const Tensor& t) { return memory(desc, dnnl_engine(), t.raw_data()); }

// Runs `direction` with filter memory in the primitive's layout; `filter` is
// the caller's filter (or filter gradient) tensor in our layout.
template <typename Run>
void with_filter(const ConvPrimitive& conv, Direction direction, const Tensor& filter, Run run) {
  dnnl::stream& stream = dnnl_stream();
  memory user = wrap(conv.filter_user, filter);
  std::optional<memory> own;
  if (conv.filter_reorder) own.emplace(conv.filter, dnnl_engine());
  const bool filter_is_output = direction == Direction::kBackwardFilter;
  if (own && !filter_is_output) NIMBUS_DNNL_CHECK(conv.filter_reorder->execute(stream, user, *own));
  run(own ? *own : user);
  if (own && filter_is_output) NIMBUS_DNNL_CHECK(conv.filter_reorder->execute(stream, *own, user));
  stream.wait();
}

// x (N,H,W,C) | (N,C,H,W), filter (KH,KW,C/G,F) | (F,C/G,KH,KW) -> y (N,OH,OW,F) | (N,F,OH,OW);
// fused_conv2d adds its bias (F) and activation.
void onednn_conv2d(KernelContext& ctx) {
  const Tensor &x = ctx.inputs[0], &filter = ctx.inputs[1];
  const Conv2dGeometry g(x.shape(), filter.shape(), ctx.attrs, ctx.op.name);
  Epilogue epilogue;
  if (ctx.inputs.size() == 3) {
    epilogue = {.bias = true, .activation = fused_activation_of(ctx.attrs)};
  }
  const DType dtype = x.dtype();
  const ConvPrimitive& conv = get_conv(Direction::kForward, g, dtype, epilogue);
  with_filter(conv, Direction::kForward, filter, [&](const memory& w) {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(image_desc(g.input, dtype), x)},
                                         {DNNL_ARG_WEIGHTS, w},
                                         {DNNL_ARG_DST, wrap(image_desc(g.output, dtype), ctx.outputs[0])}};
    if (epilogue.bias) {
      args.emplace(DNNL_ARG_BIAS,
                   wrap(memory::desc({g.filters}, dnnl_data_type(dtype), memory::format_tag::x), ctx.inputs[2]));
    }
    NIMBUS_DNNL_CHECK(conv.primitive.execute(dnnl_stream(), args));
  });
}

// grad_y (N,OH,OW,F), filter (KH,KW,C/G,F) -> grad_x (N,H,W,C); NCHW alike.
void onednn_conv2d_backward_input(KernelContext& ctx) {
  const Tensor &grad_y = ctx.inputs[0], &filter = ctx.inputs[1];
  const Conv2dGeometry g(ctx.attrs.get_shape("input_shape"), filter.shape(), ctx.attrs, ctx.op.name);
  const DType dtype = grad_y.dtype();
  const ConvPrimitive& conv = get_conv(Direction::kBackwardInput, g, dtype);
  with_filter(conv, Direction::kBackwardInput, filter, [&](const memory& w) {
    NIMBUS_DNNL_CHECK(
        conv.primitive.execute(dnnl_stream(), {{DNNL_ARG_DIFF_DST, wrap(image_desc(g.output, dtype), grad_y)},
                                               {DNNL_ARG_WEIGHTS, w},
                                               {DNNL_ARG_DIFF_SRC, wrap(image_desc(g.input, dtype), ctx.outputs[0])}}));
  });
}

// grad_y (N,OH,OW,F), x (N,H,W,C) -> grad_filter (KH,KW,C/G,F); NCHW alike.
void onednn_conv2d_backward_filter(KernelContext& ctx) {
  const Tensor &grad_y = ctx.inputs[0], &x = ctx.inputs[1];
  const Conv2dGeometry g(x.shape(), ctx.attrs.get_shape("filter_shape"), ctx.attrs, ctx.op.name);
  const DType dtype = x.dtype();
  const ConvPrimitive& conv = get_conv(Direction::kBackwardFilter, g, dtype);
  with_filter(conv, Direction::kBackwardFilter, ctx.outputs[0], [&](const memory& grad_w) {
    NIMBUS_DNNL_CHECK(
        conv.primitive.execute(dnnl_stream(), {{DNNL_ARG_SRC, wrap(image_desc(g.input, dtype), x)},
                                               {DNNL_ARG_DIFF_DST, wrap(image_desc(g.output, dtype), grad_y)},
                                               {DNNL_ARG_DIFF_WEIGHTS, grad_w}}));
  });
}

KernelDef onednn_kernel(KernelFn fn) {
  return {.name = "onednn",
          .device = DeviceType::kCPU,
          .dtypes = {DType::kF32, DType::kBF16},
          .priority = 100,
          .fn = std::move(fn),
          .supports = [](const KernelContext& ctx) { return dnnl_runs_natively(ctx.inputs, ctx.outputs); }};
}

const bool kRegistered = register_kernel("conv2d", onednn_kernel(onednn_conv2d)) &&
                         register_kernel("fused_conv2d", onednn_kernel(onednn_conv2d)) &&
                         register_kernel("conv2d_backward_input", onednn_kernel(onednn_conv2d_backward_input)) &&
                         register_kernel("conv2d_backward_filter", onednn_kernel(onednn_conv2d_backward_filter));

}  // namespace
}  // namespace nimbus::cpu
