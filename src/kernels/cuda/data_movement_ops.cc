// The data-movement ops a training step runs besides its math, on CUDA:
// fill (every scalar constant of a traced step), one_hot (the cross-entropy
// gradient), reshape (a copy when the graph gives it its own buffer) and
// assign (a variable update that fusion did not fold into its producer).
// fill and one_hot launch src/device/cuda/kernels/data_movement_kernels.cu;
// the copies are cudaMemcpyAsync on the op's stream.
#include "nimbus/base/dtype.h"
#include "nimbus/device/backend.h"
#include "nimbus/ops/for_kernels/copy.h"
#include "nimbus/ops/registry.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/cuda_stream.h"
#include "src/device/cuda/kernels/kernels.h"
#include "src/kernels/cuda/value_pattern.h"

namespace nimbus::cuda {
namespace {

void fill(KernelContext& ctx) {
  Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  const uint64_t pattern = value_pattern(out.dtype(), ctx.attrs.get_float("value"));
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::fill(out.raw_data(), out.numel(), static_cast<int>(dtype_size(out.dtype())), pattern,
                                  multiprocessor_count(stream.device().index), stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH("fill", stream);
}

void one_hot(KernelContext& ctx) {
  const Tensor& ids = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  const kernels::LabelType id_type = ids.dtype() == DType::kI64   ? kernels::LabelType::kI64
                                     : ids.dtype() == DType::kI32 ? kernels::LabelType::kI32
                                                                  : kernels::LabelType::kU8;
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::one_hot(ids.raw_data(), id_type, static_cast<float*>(out.raw_data()), ids.numel(),
                                     ctx.attrs.get_int("depth"), static_cast<float>(ctx.attrs.get_float("on")),
                                     static_cast<float>(ctx.attrs.get_float("off")),
                                     multiprocessor_count(stream.device().index), stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH("one_hot", stream);
}

void assign(KernelContext& ctx) {
  const Tensor& target = ctx.inputs[0];
  const Tensor& value = ctx.inputs[1];
  if (target.raw_data() == value.raw_data()) return;
  backend(DeviceType::kCUDA)
      .copy(value.raw_data(), value.device(), target.raw_data(), target.device(), target.nbytes(), ctx.stream);
}

std::vector<DType> all_dtypes() { return {std::begin(kAllDTypes), std::end(kAllDTypes)}; }

const bool kRegistered = [] {
  register_kernel("fill",
                  {.name = "cuda", .device = DeviceType::kCUDA, .dtypes = all_dtypes(), .priority = 1, .fn = fill});
  // one_hot dispatches on its ids' dtype; the kernel writes f32.
  register_kernel("one_hot",
                  {.name = "cuda",
                   .device = DeviceType::kCUDA,
                   .dtypes = {DType::kI64, DType::kI32, DType::kU8},
                   .priority = 1,
                   .fn = one_hot,
                   .supports = [](const KernelContext& ctx) { return ctx.outputs[0].dtype() == DType::kF32; }});
  register_kernel("reshape", {.name = "cuda",
                              .device = DeviceType::kCUDA,
                              .dtypes = all_dtypes(),
                              .priority = 1,
                              .fn = internal::copy_if_distinct});
  register_kernel("assign",
                  {.name = "cuda", .device = DeviceType::kCUDA, .dtypes = all_dtypes(), .priority = 1, .fn = assign});
  return true;
}();

}  // namespace
}  // namespace nimbus::cuda
