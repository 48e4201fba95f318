// batch_norm_training, batch_norm_inference and batch_norm_backward on CUDA
// through cuDNN's spatial batch norm (one mean and variance per channel), f32,
// channel axis last (NHWC, any rank) or 1 (NCHW).
//
// x of any rank becomes a 4-D cuDNN tensor: channels last as NHWC
// (dim 0, C, the axes between, 1), channels first as NCHW (dim 0, C, the
// axes after, 1). Where our ops and cuDNN differ:
// - training returns the batch mean and biased variance: cuDNN saves the mean
//   (written straight into our output) and 1 / sqrt(variance + eps), turned
//   back into the variance by a small kernel (in double: the error stays near
//   f32's rounding). cuDNN's running averages are not asked for: the layer
//   updates its moving statistics with ops.
// - backward takes (mean, variance) as inputs; cuDNN takes the mean and
//   1 / sqrt(variance + eps), computed into scratch by a small kernel.
// bf16 / f16 batch norm would need f32 statistics and parameters (cuDNN's
// rule for 16-bit data); our ops keep them in x's dtype, so those have no
// CUDA kernel yet.
#include <vector>

#include "nimbus/ops/registry.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/cuda_stream.h"
#include "src/device/cuda/cudnn_handle.h"
#include "src/device/cuda/kernels/cudnn_glue_kernels.h"
#include "src/device/cuda/lazy_libraries.h"
#include "src/ops/internal/window_geometry.h"

namespace nimbus::cuda {
namespace {

constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL;

// x as cuDNN's 4-D tensor, and the (1, C, 1, 1) tensor of its per-channel values.
struct NormShape {
  NormShape(const Shape& shape, const Attrs& attrs, const std::string& op)
      : channels_last(internal::parse_channels_last(attrs.get_string("data_format"), op) || shape.rank() == 2) {
    const int channel_axis = channels_last ? shape.rank() - 1 : 1;
    int64_t between = 1;
    for (int i = 1; i < shape.rank(); ++i) {
      if (i != channel_axis) between *= shape[i];
    }
    nchw = {shape[0], shape[channel_axis], between, 1};
  }
  bool channels_last;
  Dims4 nchw;
};

struct NormDescriptors {
  explicit NormDescriptors(const NormShape& s)
      : x(s.nchw, DType::kF32, s.channels_last), channel({1, s.nchw[1], 1, 1}, DType::kF32, false) {}
  TensorDescriptor x, channel;
};

const void* data(const Tensor& t) { return t.raw_data(); }
void* data(Tensor& t) { return t.raw_data(); }

// (x, gamma, beta) -> (y, batch mean, biased batch variance).
void training(KernelContext& ctx) {
  const NormShape s(ctx.inputs[0].shape(), ctx.attrs, ctx.op.name);
  CudaStream& stream = cuda_stream(ctx.stream);
  const NormDescriptors d(s);
  const double epsilon = ctx.attrs.get_float("epsilon");
  Tensor& variance = ctx.outputs[2];
  Scratch inverse_std(stream, variance.nbytes());
  NIMBUS_CUDNN_CHECK(cudnn().cudnnBatchNormalizationForwardTraining(
      cudnn_handle(stream), kMode, &kOne, &kZero, d.x.get(), data(ctx.inputs[0]), d.x.get(), data(ctx.outputs[0]),
      d.channel.get(), data(ctx.inputs[1]), data(ctx.inputs[2]), 1.0, nullptr, nullptr, epsilon, data(ctx.outputs[1]),
      inverse_std.get()));
  NIMBUS_CUDA_CHECK(kernels::variance_from_inverse_std(static_cast<const float*>(inverse_std.get()),
                                                       static_cast<float*>(data(variance)), variance.numel(), epsilon,
                                                       stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH(ctx.op.name.c_str(), stream);
}

// (x, gamma, beta, mean, variance) -> y.
void inference(KernelContext& ctx) {
  const NormShape s(ctx.inputs[0].shape(), ctx.attrs, ctx.op.name);
  CudaStream& stream = cuda_stream(ctx.stream);
  const NormDescriptors d(s);
  NIMBUS_CUDNN_CHECK(cudnn().cudnnBatchNormalizationForwardInference(
      cudnn_handle(stream), kMode, &kOne, &kZero, d.x.get(), data(ctx.inputs[0]), d.x.get(), data(ctx.outputs[0]),
      d.channel.get(), data(ctx.inputs[1]), data(ctx.inputs[2]), data(ctx.inputs[3]), data(ctx.inputs[4]),
      ctx.attrs.get_float("epsilon")));
  NIMBUS_CUDA_CHECK_LAUNCH(ctx.op.name.c_str(), stream);
}

// (grad_y, x, gamma, mean, variance) -> (grad_x, grad_gamma, grad_beta).
void backward(KernelContext& ctx) {
  const NormShape s(ctx.inputs[1].shape(), ctx.attrs, ctx.op.name);
  CudaStream& stream = cuda_stream(ctx.stream);
  const NormDescriptors d(s);
  const double epsilon = ctx.attrs.get_float("epsilon");
  const Tensor& variance = ctx.inputs[4];
  Scratch inverse_std(stream, variance.nbytes());
  NIMBUS_CUDA_CHECK(kernels::inverse_std(static_cast<const float*>(data(variance)),
                                         static_cast<float*>(inverse_std.get()), variance.numel(), epsilon,
                                         stream.handle()));
  NIMBUS_CUDNN_CHECK(cudnn().cudnnBatchNormalizationBackward(
      cudnn_handle(stream), kMode, &kOne, &kZero, &kOne, &kZero, d.x.get(), data(ctx.inputs[1]), d.x.get(),
      data(ctx.inputs[0]), d.x.get(), data(ctx.outputs[0]), d.channel.get(), data(ctx.inputs[2]), data(ctx.outputs[1]),
      data(ctx.outputs[2]), epsilon, data(ctx.inputs[3]), inverse_std.get()));
  NIMBUS_CUDA_CHECK_LAUNCH(ctx.op.name.c_str(), stream);
}

const bool kRegistered = [] {
  register_kernel("batch_norm_training", cudnn_kernel({DType::kF32}, training, nullptr));
  register_kernel("batch_norm_inference", cudnn_kernel({DType::kF32}, inference, nullptr));
  register_kernel("batch_norm_backward", cudnn_kernel({DType::kF32}, backward, nullptr));
  return true;
}();

}  // namespace
}  // namespace nimbus::cuda
