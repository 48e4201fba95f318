// sum, mean and reduce_max (f32, bf16, f16), softmax, log_softmax and
// sparse_softmax_cross_entropy with its gradient (f32) on CUDA: the ops' shapes turned into
// launches of src/device/cuda/kernels/reduction_kernels.cu. The 16-bit
// reductions are the bias gradients of a mixed-precision backward pass.
#include <vector>

#include "nimbus/ops/for_kernels/reduce_geometry.h"
#include "nimbus/ops/registry.h"
#include "src/device/cuda/cuda_stream.h"
#include "src/device/cuda/kernels/kernels.h"

namespace nimbus::cuda {
namespace {

template <kernels::Reduce kind>
void reduce(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const internal::ReduceGeometry geometry(x.shape(), ctx.attrs.get_ints("axes"), ctx.op.name.c_str());
  kernels::ReduceShape shape;
  shape.rank = x.rank();
  shape.outputs = ctx.outputs[0].numel();
  shape.count = geometry.count;
  const auto strides = x.shape().strides();
  for (int axis = 0; axis < x.rank(); ++axis) {
    shape.dims[axis] = x.shape().dims()[axis];
    shape.strides[axis] = strides[axis];
    shape.reduced[axis] = geometry.kept_shape.dims()[axis] == 1;
  }
  if (shape.outputs == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  const kernels::FloatType type = x.dtype() == DType::kBF16  ? kernels::FloatType::kBF16
                                  : x.dtype() == DType::kF16 ? kernels::FloatType::kF16
                                                             : kernels::FloatType::kF32;
  NIMBUS_CUDA_CHECK(kernels::reduce(kind, type, x.raw_data(), ctx.outputs[0].raw_data(), shape,
                                    multiprocessor_count(stream.device().index), stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH(ctx.op.name.c_str(), stream);
}

void softmax(KernelContext& ctx, bool log_form) {
  const Tensor& x = ctx.inputs[0];
  const int axis = normalize_axis(ctx.attrs.get_int("axis"), x.rank(), ctx.op.name.c_str());
  const internal::AxisSplit split(x.shape(), axis);
  if (x.numel() == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::softmax(
      static_cast<const float*>(x.raw_data()), static_cast<float*>(ctx.outputs[0].raw_data()), split.outer, split.axis,
      split.inner, log_form, multiprocessor_count(stream.device().index), stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH(ctx.op.name.c_str(), stream);
}

kernels::LabelType label_type(DType dtype) {
  return dtype == DType::kI64   ? kernels::LabelType::kI64
         : dtype == DType::kI32 ? kernels::LabelType::kI32
                                : kernels::LabelType::kU8;
}

void sparse_cross_entropy(KernelContext& ctx) {
  const int64_t rows = ctx.outputs[0].numel();
  if (rows == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::sparse_cross_entropy(
      static_cast<const float*>(ctx.inputs[0].raw_data()), ctx.inputs[1].raw_data(), label_type(ctx.inputs[1].dtype()),
      static_cast<float*>(ctx.outputs[0].raw_data()), rows, ctx.inputs[0].shape().dims().back(),
      multiprocessor_count(stream.device().index), stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH("sparse_softmax_cross_entropy", stream);
}

// Inputs logits, labels, grad_loss; the output has the logits' shape.
void sparse_cross_entropy_backward(KernelContext& ctx) {
  const int64_t rows = ctx.inputs[2].numel();
  if (rows == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::sparse_cross_entropy_backward(
      static_cast<const float*>(ctx.inputs[0].raw_data()), ctx.inputs[1].raw_data(), label_type(ctx.inputs[1].dtype()),
      static_cast<const float*>(ctx.inputs[2].raw_data()), static_cast<float*>(ctx.outputs[0].raw_data()), rows,
      ctx.inputs[0].shape().dims().back(), multiprocessor_count(stream.device().index), stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH("sparse_softmax_cross_entropy_backward", stream);
}

KernelDef cuda_kernel(KernelFn fn, std::vector<DType> dtypes = {DType::kF32}) {
  return {.name = "cuda",
          .device = DeviceType::kCUDA,
          .dtypes = std::move(dtypes),
          .priority = 1,
          .fn = std::move(fn),
          .supports = nullptr};
}

const bool kRegistered = [] {
  const std::vector<DType> reduced = {DType::kF32, DType::kBF16, DType::kF16};
  register_kernel("sum", cuda_kernel(reduce<kernels::Reduce::kSum>, reduced));
  register_kernel("mean", cuda_kernel(reduce<kernels::Reduce::kMean>, reduced));
  register_kernel("reduce_max", cuda_kernel(reduce<kernels::Reduce::kMax>, reduced));
  register_kernel("softmax", cuda_kernel([](KernelContext& ctx) { softmax(ctx, false); }));
  register_kernel("log_softmax", cuda_kernel([](KernelContext& ctx) { softmax(ctx, true); }));
  register_kernel("sparse_softmax_cross_entropy", cuda_kernel(sparse_cross_entropy));
  register_kernel("sparse_softmax_cross_entropy_backward", cuda_kernel(sparse_cross_entropy_backward));
  return true;
}();

}  // namespace
}  // namespace nimbus::cuda
