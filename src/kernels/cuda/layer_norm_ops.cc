// layer_norm and layer_norm_backward on CUDA (f32): x seen as (rows, features)
// over its last axis, launching src/device/cuda/kernels/layer_norm_kernels.cu.
#include "nimbus/ops/registry.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/cuda_stream.h"
#include "src/device/cuda/kernels/layer_norm_kernels.h"

namespace nimbus::cuda {
namespace {

const float* in(const KernelContext& ctx, size_t i) { return static_cast<const float*>(ctx.inputs[i].raw_data()); }
float* out(KernelContext& ctx, size_t i) { return static_cast<float*>(ctx.outputs[i].raw_data()); }

void layer_norm(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const int64_t features = x.dim(-1);
  if (features == 0 || x.numel() == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::layer_norm(in(ctx, 0), in(ctx, 1), in(ctx, 2), out(ctx, 0), out(ctx, 1), out(ctx, 2),
                                        x.numel() / features, features, ctx.attrs.get_float("epsilon"),
                                        multiprocessor_count(stream.device().index), stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH("layer_norm", stream);
}

void layer_norm_backward(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[1];
  const int64_t features = x.dim(-1);
  if (features == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::layer_norm_backward(in(ctx, 0), in(ctx, 1), in(ctx, 2), in(ctx, 3), in(ctx, 4),
                                                 out(ctx, 0), out(ctx, 1), out(ctx, 2), x.numel() / features, features,
                                                 multiprocessor_count(stream.device().index), stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH("layer_norm_backward", stream);
}

const bool kRegistered = [] {
  for (const auto& [op, fn] : std::initializer_list<std::pair<const char*, KernelFn>>{
           {"layer_norm", layer_norm}, {"layer_norm_backward", layer_norm_backward}}) {
    register_kernel(op,
                    {.name = "cuda", .device = DeviceType::kCUDA, .dtypes = {DType::kF32}, .priority = 1, .fn = fn});
  }
  return true;
}();

}  // namespace
}  // namespace nimbus::cuda
