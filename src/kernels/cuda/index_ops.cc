// argmax (f32, f64, i32, i64, u8), gather (any dtype: an embedding lookup) and
// scatter_add (f32, f64: gather's gradient) on CUDA: the op's axis split into
// (outer, axis, inner) and a launch of src/device/cuda/kernels/index_kernels.cu.
#include "nimbus/ops/for_kernels/reduce_geometry.h"
#include "nimbus/ops/registry.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/cuda_stream.h"
#include "src/device/cuda/kernels/index_kernels.h"

namespace nimbus::cuda {
namespace {

kernels::ValueType value_type(DType dtype) {
  switch (dtype) {
    case DType::kF64: return kernels::ValueType::kF64;
    case DType::kI32: return kernels::ValueType::kI32;
    case DType::kI64: return kernels::ValueType::kI64;
    case DType::kU8: return kernels::ValueType::kU8;
    default: return kernels::ValueType::kF32;
  }
}

void argmax(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const int axis = normalize_axis(ctx.attrs.get_int("axis"), x.rank(), "argmax");
  const internal::AxisSplit split(x.shape(), axis);
  if (ctx.outputs[0].numel() == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::argmax(x.raw_data(), value_type(x.dtype()),
                                    static_cast<int64_t*>(ctx.outputs[0].raw_data()), split.outer, split.axis,
                                    split.inner, multiprocessor_count(stream.device().index), stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH("argmax", stream);
}

void gather(KernelContext& ctx) {
  const Tensor& params = ctx.inputs[0];
  const Tensor& indices = ctx.inputs[1];
  const int axis = normalize_axis(ctx.attrs.get_int("axis"), params.rank(), "gather");
  const internal::AxisSplit split(params.shape(), axis);
  if (ctx.outputs[0].numel() == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::gather(params.raw_data(), indices.raw_data(), indices.dtype() == DType::kI64,
                                    ctx.outputs[0].raw_data(), split.outer, split.axis, split.inner, indices.numel(),
                                    static_cast<int>(dtype_size(params.dtype())),
                                    multiprocessor_count(stream.device().index), stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH("gather", stream);
}

void scatter_add(KernelContext& ctx) {
  Tensor& out = ctx.outputs[0];
  const Tensor& indices = ctx.inputs[1];
  const int axis = normalize_axis(ctx.attrs.get_int("axis"), out.rank(), "scatter_add");
  const internal::AxisSplit split(out.shape(), axis);
  if (out.numel() == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::scatter_add(ctx.inputs[0].raw_data(), indices.raw_data(), indices.dtype() == DType::kI64,
                                         out.raw_data(), out.dtype() == DType::kF64, split.outer, split.axis,
                                         split.inner, indices.numel(), multiprocessor_count(stream.device().index),
                                         stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH("scatter_add", stream);
}

KernelDef cuda_kernel(std::vector<DType> dtypes, KernelFn fn) {
  return {.name = "cuda", .device = DeviceType::kCUDA, .dtypes = std::move(dtypes), .priority = 1, .fn = std::move(fn)};
}

const bool kRegistered = [] {
  register_kernel("argmax", cuda_kernel({DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kU8}, argmax));
  register_kernel("gather", cuda_kernel({std::begin(kAllDTypes), std::end(kAllDTypes)}, gather));
  register_kernel("scatter_add", cuda_kernel({DType::kF32, DType::kF64}, scatter_add));
  return true;
}();

}  // namespace
}  // namespace nimbus::cuda
