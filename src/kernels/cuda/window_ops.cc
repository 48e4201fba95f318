// conv2d, conv2d_backward_input, conv2d_backward_filter, fused_conv2d (bias
// and none or ReLU) and max_pool2d (+ backward) on CUDA, f32, NHWC or NCHW:
// the ops' geometry (nimbus/ops/for_kernels/window_geometry.h, shared with the
// reference kernels) turned into launches of
// src/device/cuda/kernels/window_kernels.cu.
#include "nimbus/ops/activation_table.h"
#include "nimbus/ops/for_kernels/window_geometry.h"
#include "nimbus/ops/registry.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/cuda_stream.h"
#include "src/device/cuda/kernels/kernels.h"

namespace nimbus::cuda {
namespace {

using internal::Conv2dGeometry;
using internal::Pool2dGeometry;

kernels::WindowShape window_shape(const internal::ImageLayout& input, const internal::ImageLayout& output,
                                  const internal::WindowAxis& rows, const internal::WindowAxis& cols) {
  return {.batch = input.batch,
          .in_h = input.height,
          .in_w = input.width,
          .in_c = input.channels,
          .out_h = output.height,
          .out_w = output.width,
          .out_c = output.channels,
          .kernel_h = rows.kernel,
          .kernel_w = cols.kernel,
          .stride_h = rows.stride,
          .stride_w = cols.stride,
          .dilation_h = rows.dilation,
          .dilation_w = cols.dilation,
          .pad_top = rows.pad_before,
          .pad_left = cols.pad_before,
          .groups = 1,
          .channels_last = input.channels_last};
}

kernels::WindowShape conv_shape(const Conv2dGeometry& g) {
  kernels::WindowShape shape = window_shape(g.input, g.output, g.rows, g.cols);
  shape.groups = g.groups;
  return shape;
}

const float* f32(const Tensor& t) { return static_cast<const float*>(t.raw_data()); }
float* f32(Tensor& t) { return static_cast<float*>(t.raw_data()); }
int sms(CudaStream& stream) { return multiprocessor_count(stream.device().index); }

// conv2d, or fused_conv2d when `bias` is given.
void conv2d(KernelContext& ctx, const Tensor* bias, bool relu) {
  const Conv2dGeometry g(ctx.inputs[0].shape(), ctx.inputs[1].shape(), ctx.attrs, ctx.op.name);
  if (ctx.outputs[0].numel() == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::conv2d(f32(ctx.inputs[0]), f32(ctx.inputs[1]), bias ? f32(*bias) : nullptr, relu,
                                    f32(ctx.outputs[0]), conv_shape(g), sms(stream), stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH(ctx.op.name.c_str(), stream);
}

void conv2d_backward_input(KernelContext& ctx) {
  const Conv2dGeometry g(ctx.attrs.get_shape("input_shape"), ctx.inputs[1].shape(), ctx.attrs, ctx.op.name);
  if (ctx.outputs[0].numel() == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::conv2d_backward_input(f32(ctx.inputs[0]), f32(ctx.inputs[1]), f32(ctx.outputs[0]),
                                                   conv_shape(g), sms(stream), stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH(ctx.op.name.c_str(), stream);
}

void conv2d_backward_filter(KernelContext& ctx) {
  const Conv2dGeometry g(ctx.inputs[1].shape(), ctx.attrs.get_shape("filter_shape"), ctx.attrs, ctx.op.name);
  if (ctx.outputs[0].numel() == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::conv2d_backward_filter(f32(ctx.inputs[0]), f32(ctx.inputs[1]), f32(ctx.outputs[0]),
                                                    conv_shape(g), stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH(ctx.op.name.c_str(), stream);
}

void max_pool2d(KernelContext& ctx) {
  const Pool2dGeometry g(ctx.inputs[0].shape(), ctx.attrs, ctx.op.name);
  if (ctx.outputs[0].numel() == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::max_pool2d(f32(ctx.inputs[0]), f32(ctx.outputs[0]),
                                        window_shape(g.input, g.output, g.rows, g.cols), sms(stream), stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH("max_pool2d", stream);
}

void max_pool2d_backward(KernelContext& ctx) {
  const Pool2dGeometry g(ctx.inputs[1].shape(), ctx.attrs, ctx.op.name);
  if (ctx.outputs[0].numel() == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::max_pool2d_backward(f32(ctx.inputs[0]), f32(ctx.inputs[1]), f32(ctx.outputs[0]),
                                                 window_shape(g.input, g.output, g.rows, g.cols), sms(stream),
                                                 stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH("max_pool2d_backward", stream);
}

KernelDef cuda_kernel(KernelFn fn, std::function<bool(const KernelContext&)> supports = nullptr) {
  return {.name = "cuda",
          .device = DeviceType::kCUDA,
          .dtypes = {DType::kF32},
          .priority = 1,
          .fn = std::move(fn),
          .supports = std::move(supports)};
}

const bool kRegistered = [] {
  register_kernel("conv2d", cuda_kernel([](KernelContext& ctx) { conv2d(ctx, nullptr, false); }));
  register_kernel("conv2d_backward_input", cuda_kernel(conv2d_backward_input));
  register_kernel("conv2d_backward_filter", cuda_kernel(conv2d_backward_filter));
  // The kernel adds the bias and applies ReLU in its epilogue; other activations have no CUDA kernel yet.
  register_kernel(
      "fused_conv2d",
      cuda_kernel(
          [](KernelContext& ctx) { conv2d(ctx, &ctx.inputs[2], fused_activation_of(ctx.attrs) == Activation::kRelu); },
          [](const KernelContext& ctx) {
            const Activation activation = fused_activation_of(ctx.attrs);
            return activation == Activation::kLinear || activation == Activation::kRelu;
          }));
  register_kernel("max_pool2d", cuda_kernel(max_pool2d));
  register_kernel("max_pool2d_backward", cuda_kernel(max_pool2d_backward));
  return true;
}();

}  // namespace
}  // namespace nimbus::cuda
