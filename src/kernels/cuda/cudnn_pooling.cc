// max_pool2d, avg_pool2d and their backward ops on CUDA through cuDNN's
// pooling API (cudnnPoolingForward / cudnnPoolingBackward), f32, bf16 and
// f16, NHWC or NCHW. TF's padding rules map onto cuDNN's modes: padded taps
// never win a max (CUDNN_POOLING_MAX_DETERMINISTIC ignores them too) and an
// average divides by the taps inside the input
// (CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING). Ties in a max window are
// where the reference (first maximum) and cuDNN may differ; the harness's
// random inputs have none.
//
// cuDNN's backward takes the forward's input and output: max_pool2d_backward
// has x, so it recomputes y into scratch memory; avg_pool2d_backward has
// neither, and cuDNN's average modes read neither, but the call needs
// buffers of the right size (TensorFlow passes placeholders the same way).
//
// Asymmetric "same" padding and empty batches are turned away by supports(),
// so the direct max-pooling kernels of window_ops.cc run (average pooling
// then has no CUDA kernel).
#include <optional>
#include <vector>

#include "nimbus/ops/for_kernels/window_geometry.h"
#include "nimbus/ops/registry.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/cuda_stream.h"
#include "src/device/cuda/lazy_libraries.h"
#include "src/kernels/cuda/cudnn_handle.h"
#include "src/kernels/cuda/cudnn_problem.h"

namespace nimbus::cuda {
namespace {

using internal::Pool2dGeometry;

struct PoolingDescriptor : Descriptor<cudnnPoolingDescriptor_t, &CudnnApi::cudnnCreatePoolingDescriptor,
                                      &CudnnApi::cudnnDestroyPoolingDescriptor> {
  PoolingDescriptor(const PoolProblem& p, cudnnPoolingMode_t mode) {
    NIMBUS_CUDNN_CHECK(cudnn().cudnnSetPooling2dDescriptor(
        get(), mode, CUDNN_NOT_PROPAGATE_NAN, static_cast<int>(p.window[0]), static_cast<int>(p.window[1]),
        static_cast<int>(p.pad[0]), static_cast<int>(p.pad[1]), static_cast<int>(p.stride[0]),
        static_cast<int>(p.stride[1])));
  }
};

// The descriptors of one call.
struct PoolDescriptors {
  PoolDescriptors(const PoolProblem& p, cudnnPoolingMode_t mode)
      : pooling(p, mode), x(p.x, p.dtype, p.channels_last), y(p.y, p.dtype, p.channels_last) {}
  PoolingDescriptor pooling;
  TensorDescriptor x, y;
};

cudnnPoolingMode_t mode_for(const std::string& op) {
  return op.starts_with("max") ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
}

std::optional<PoolProblem> problem_for(const Pool2dGeometry& g, DType dtype) {
  if (g.input.numel() == 0 || g.output.numel() == 0) return std::nullopt;
  return pool_problem(g, dtype);
}

// max_pool2d, avg_pool2d: x -> y.
void forward(KernelContext& ctx) {
  const PoolProblem p =
      *problem_for(Pool2dGeometry(ctx.inputs[0].shape(), ctx.attrs, ctx.op.name), ctx.inputs[0].dtype());
  CudaStream& stream = cuda_stream(ctx.stream);
  const PoolDescriptors d(p, mode_for(ctx.op.name));
  NIMBUS_CUDNN_CHECK(cudnn().cudnnPoolingForward(cudnn_handle(stream), d.pooling.get(), &kOne, d.x.get(),
                                                 ctx.inputs[0].raw_data(), &kZero, d.y.get(),
                                                 ctx.outputs[0].raw_data()));
  NIMBUS_CUDA_CHECK_LAUNCH(ctx.op.name.c_str(), stream);
}

// max_pool2d_backward: (grad_y, x) -> grad_x, with y = max_pool2d(x) recomputed for cuDNN.
void max_backward(KernelContext& ctx) {
  const Tensor &grad_y = ctx.inputs[0], &x = ctx.inputs[1];
  const PoolProblem p = *problem_for(Pool2dGeometry(x.shape(), ctx.attrs, ctx.op.name), x.dtype());
  CudaStream& stream = cuda_stream(ctx.stream);
  const cudnnHandle_t handle = cudnn_handle(stream);
  const PoolDescriptors d(p, CUDNN_POOLING_MAX_DETERMINISTIC);
  Scratch y(stream, grad_y.nbytes());
  NIMBUS_CUDNN_CHECK(
      cudnn().cudnnPoolingForward(handle, d.pooling.get(), &kOne, d.x.get(), x.raw_data(), &kZero, d.y.get(), y.get()));
  NIMBUS_CUDNN_CHECK(cudnn().cudnnPoolingBackward(handle, d.pooling.get(), &kOne, d.y.get(), y.get(), d.y.get(),
                                                  grad_y.raw_data(), d.x.get(), x.raw_data(), &kZero, d.x.get(),
                                                  ctx.outputs[0].raw_data()));
  NIMBUS_CUDA_CHECK_LAUNCH(ctx.op.name.c_str(), stream);
}

// avg_pool2d_backward: grad_y -> grad_x (input_shape). The average modes read neither x nor y: grad_x and
// grad_y stand in for them.
void avg_backward(KernelContext& ctx) {
  const Tensor& grad_y = ctx.inputs[0];
  const PoolProblem p =
      *problem_for(Pool2dGeometry(ctx.attrs.get_shape("input_shape"), ctx.attrs, ctx.op.name), grad_y.dtype());
  CudaStream& stream = cuda_stream(ctx.stream);
  const PoolDescriptors d(p, CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING);
  void* grad_x = ctx.outputs[0].raw_data();
  NIMBUS_CUDNN_CHECK(cudnn().cudnnPoolingBackward(cudnn_handle(stream), d.pooling.get(), &kOne, d.y.get(),
                                                  grad_y.raw_data(), d.y.get(), grad_y.raw_data(), d.x.get(), grad_x,
                                                  &kZero, d.x.get(), grad_x));
  NIMBUS_CUDA_CHECK_LAUNCH(ctx.op.name.c_str(), stream);
}

// The input whose shape is the pooled image: x for the forward ops and max_pool2d_backward.
bool supports(const KernelContext& ctx, const Shape& input_shape) {
  return problem_for(Pool2dGeometry(input_shape, ctx.attrs, ctx.op.name), ctx.inputs[0].dtype()).has_value();
}

const std::vector<DType> kPoolDTypes = {DType::kF32, DType::kBF16, DType::kF16};

const bool kRegistered = [] {
  const auto on_input = [](const KernelContext& ctx) { return supports(ctx, ctx.inputs[0].shape()); };
  register_kernel("max_pool2d", cudnn_kernel(kPoolDTypes, forward, on_input));
  register_kernel("avg_pool2d", cudnn_kernel(kPoolDTypes, forward, on_input));
  register_kernel("max_pool2d_backward", cudnn_kernel(kPoolDTypes, max_backward, [](const KernelContext& ctx) {
                    return supports(ctx, ctx.inputs[1].shape());
                  }));
  register_kernel("avg_pool2d_backward", cudnn_kernel(kPoolDTypes, avg_backward, [](const KernelContext& ctx) {
                    return supports(ctx, ctx.attrs.get_shape("input_shape"));
                  }));
  return true;
}();

}  // namespace
}  // namespace nimbus::cuda
