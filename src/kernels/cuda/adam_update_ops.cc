// adam_update on CUDA (f32): the weights, slots and gradients of every tensor
// go to src/device/cuda/kernels/adam_kernels.cu as a list of pointers and
// sizes (multi-tensor apply), one launch per 64 tensors.
#include <vector>

#include "nimbus/ops/for_kernels/adam_update_call.h"
#include "nimbus/ops/registry.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/cuda_stream.h"
#include "src/device/cuda/kernels/adam_kernels.h"

namespace nimbus::cuda {
namespace {

float* writable(const Tensor& t) { return static_cast<float*>(t.raw_data()); }

void adam_update(KernelContext& ctx) {
  const internal::AdamUpdateCall call(ctx.inputs, ctx.attrs);
  std::vector<kernels::AdamTensor> tensors;
  tensors.reserve(call.count);
  for (size_t i = 0; i < call.count; ++i) {
    // The op writes into its leading inputs (the variables' own tensors).
    tensors.push_back({.weight = writable(call.weight(i)),
                       .m = writable(call.m(i)),
                       .v = writable(call.v(i)),
                       .gradient = static_cast<const float*>(call.gradient(i).raw_data()),
                       .size = call.weight(i).numel()});
  }
  const kernels::AdamScalars scalars{
      .alpha = static_cast<const double*>(call.alpha().raw_data()),
      .decay = static_cast<const double*>(call.decay().raw_data()),
      .apply = call.has_apply() ? static_cast<const bool*>(call.apply().raw_data()) : nullptr,
      .one_minus_beta_1 = static_cast<float>(1 - ctx.attrs.get_float("beta_1")),
      .one_minus_beta_2 = static_cast<float>(1 - ctx.attrs.get_float("beta_2")),
      .epsilon = static_cast<float>(ctx.attrs.get_float("epsilon")),
      .weight_decay = ctx.attrs.get_bool("weight_decay")};
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::adam_update(tensors.data(), static_cast<int>(tensors.size()), scalars, stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH("adam_update", stream);
}

const bool kRegistered = register_kernel(
    "adam_update",
    {.name = "cuda", .device = DeviceType::kCUDA, .dtypes = {DType::kF32}, .priority = 1, .fn = adam_update});

}  // namespace
}  // namespace nimbus::cuda
