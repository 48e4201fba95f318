// batch_norm_training, batch_norm_inference and batch_norm_backward on CUDA
// through cuDNN's spatial batch norm (one mean and variance per channel), f32,
// bf16 and f16, channel axis last (NHWC, any rank) or 1 (NCHW).
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
// - 16-bit x: our ops keep gamma, beta and the statistics in x's dtype (the
//   CPU reference reads them as such, computes in double and rounds its
//   outputs to x's dtype); cuDNN wants them in f32. They are widened into f32
//   scratch before the call, and the f32 statistics and parameter gradients
//   cuDNN writes are rounded into our outputs after it (ChannelInput,
//   ChannelOutput). x, y, grad_y and grad_x stay 16-bit; cuDNN computes in f32.
#include <memory>
#include <vector>

#include "nimbus/ops/for_kernels/window_geometry.h"
#include "nimbus/ops/registry.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/cuda_stream.h"
#include "src/device/cuda/kernels/cudnn_glue_kernels.h"
#include "src/device/cuda/lazy_libraries.h"
#include "src/kernels/cuda/cudnn_handle.h"

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

// x, y, grad_y and grad_x in x's dtype; the per-channel values in f32 whatever x's dtype (cuDNN's rule).
struct NormDescriptors {
  NormDescriptors(const NormShape& s, DType dtype)
      : x(s.nchw, dtype, s.channels_last), channel({1, s.nchw[1], 1, 1}, DType::kF32, false) {}
  TensorDescriptor x, channel;
};

const void* data(const Tensor& t) { return t.raw_data(); }
void* data(Tensor& t) { return t.raw_data(); }

kernels::HalfType half_type(DType dtype) {
  return dtype == DType::kF16 ? kernels::HalfType::kF16 : kernels::HalfType::kBF16;
}

// A per-channel input as the f32 values cuDNN takes: the tensor itself when f32, else a widened copy.
class ChannelInput {
 public:
  ChannelInput(CudaStream& stream, const Tensor& values) : pointer_(static_cast<const float*>(values.raw_data())) {
    if (values.dtype() == DType::kF32) return;
    scratch_ = std::make_unique<Scratch>(stream, static_cast<size_t>(values.numel()) * sizeof(float));
    float* widened = static_cast<float*>(scratch_->get());
    NIMBUS_CUDA_CHECK(kernels::widen_to_float(values.raw_data(), half_type(values.dtype()), widened, values.numel(),
                                              stream.handle()));
    pointer_ = widened;
  }
  const float* get() const { return pointer_; }

 private:
  std::unique_ptr<Scratch> scratch_;
  const float* pointer_;
};

// A per-channel output that cuDNN (or a glue kernel) writes in f32: the tensor itself when f32, else
// f32 scratch that finish() rounds into it.
class ChannelOutput {
 public:
  ChannelOutput(CudaStream& stream, Tensor& values) : stream_(stream), values_(values) {
    if (values.dtype() != DType::kF32) {
      scratch_ = std::make_unique<Scratch>(stream, static_cast<size_t>(values.numel()) * sizeof(float));
    }
  }
  float* get() const { return static_cast<float*>(scratch_ ? scratch_->get() : values_.raw_data()); }
  void finish() {
    if (!scratch_) return;
    NIMBUS_CUDA_CHECK(kernels::narrow_from_float(get(), values_.raw_data(), half_type(values_.dtype()), values_.numel(),
                                                 stream_.handle()));
  }

 private:
  CudaStream& stream_;
  Tensor& values_;
  std::unique_ptr<Scratch> scratch_;
};

// (x, gamma, beta) -> (y, batch mean, biased batch variance).
void training(KernelContext& ctx) {
  const NormShape s(ctx.inputs[0].shape(), ctx.attrs, ctx.op.name);
  CudaStream& stream = cuda_stream(ctx.stream);
  const NormDescriptors d(s, ctx.inputs[0].dtype());
  const double epsilon = ctx.attrs.get_float("epsilon");
  const ChannelInput gamma(stream, ctx.inputs[1]), beta(stream, ctx.inputs[2]);
  ChannelOutput mean(stream, ctx.outputs[1]), variance(stream, ctx.outputs[2]);
  const int64_t channels = ctx.outputs[2].numel();
  Scratch inverse_std(stream, static_cast<size_t>(channels) * sizeof(float));
  NIMBUS_CUDNN_CHECK(cudnn().cudnnBatchNormalizationForwardTraining(
      cudnn_handle(stream), kMode, &kOne, &kZero, d.x.get(), data(ctx.inputs[0]), d.x.get(), data(ctx.outputs[0]),
      d.channel.get(), gamma.get(), beta.get(), 1.0, nullptr, nullptr, epsilon, mean.get(), inverse_std.get()));
  NIMBUS_CUDA_CHECK(kernels::variance_from_inverse_std(static_cast<const float*>(inverse_std.get()), variance.get(),
                                                       channels, epsilon, stream.handle()));
  mean.finish();
  variance.finish();
  NIMBUS_CUDA_CHECK_LAUNCH(ctx.op.name.c_str(), stream);
}

// (x, gamma, beta, mean, variance) -> y.
void inference(KernelContext& ctx) {
  const NormShape s(ctx.inputs[0].shape(), ctx.attrs, ctx.op.name);
  CudaStream& stream = cuda_stream(ctx.stream);
  const NormDescriptors d(s, ctx.inputs[0].dtype());
  const ChannelInput gamma(stream, ctx.inputs[1]), beta(stream, ctx.inputs[2]), mean(stream, ctx.inputs[3]),
      variance(stream, ctx.inputs[4]);
  NIMBUS_CUDNN_CHECK(cudnn().cudnnBatchNormalizationForwardInference(
      cudnn_handle(stream), kMode, &kOne, &kZero, d.x.get(), data(ctx.inputs[0]), d.x.get(), data(ctx.outputs[0]),
      d.channel.get(), gamma.get(), beta.get(), mean.get(), variance.get(), ctx.attrs.get_float("epsilon")));
  NIMBUS_CUDA_CHECK_LAUNCH(ctx.op.name.c_str(), stream);
}

// (grad_y, x, gamma, mean, variance) -> (grad_x, grad_gamma, grad_beta).
void backward(KernelContext& ctx) {
  const NormShape s(ctx.inputs[1].shape(), ctx.attrs, ctx.op.name);
  CudaStream& stream = cuda_stream(ctx.stream);
  const NormDescriptors d(s, ctx.inputs[1].dtype());
  const double epsilon = ctx.attrs.get_float("epsilon");
  const ChannelInput gamma(stream, ctx.inputs[2]), mean(stream, ctx.inputs[3]), variance(stream, ctx.inputs[4]);
  ChannelOutput grad_gamma(stream, ctx.outputs[1]), grad_beta(stream, ctx.outputs[2]);
  const int64_t channels = ctx.inputs[4].numel();
  Scratch inverse_std(stream, static_cast<size_t>(channels) * sizeof(float));
  NIMBUS_CUDA_CHECK(
      kernels::inverse_std(variance.get(), static_cast<float*>(inverse_std.get()), channels, epsilon, stream.handle()));
  NIMBUS_CUDNN_CHECK(cudnn().cudnnBatchNormalizationBackward(
      cudnn_handle(stream), kMode, &kOne, &kZero, &kOne, &kZero, d.x.get(), data(ctx.inputs[1]), d.x.get(),
      data(ctx.inputs[0]), d.x.get(), data(ctx.outputs[0]), d.channel.get(), gamma.get(), grad_gamma.get(),
      grad_beta.get(), epsilon, mean.get(), inverse_std.get()));
  grad_gamma.finish();
  grad_beta.finish();
  NIMBUS_CUDA_CHECK_LAUNCH(ctx.op.name.c_str(), stream);
}

const bool kRegistered = [] {
  const std::vector<DType> dtypes = {DType::kF32, DType::kBF16, DType::kF16};
  register_kernel("batch_norm_training", cudnn_kernel(dtypes, training, nullptr));
  register_kernel("batch_norm_inference", cudnn_kernel(dtypes, inference, nullptr));
  register_kernel("batch_norm_backward", cudnn_kernel(dtypes, backward, nullptr));
  return true;
}();

}  // namespace
}  // namespace nimbus::cuda
