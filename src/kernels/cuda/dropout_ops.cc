// dropout_mask on CUDA (f32, f64, f16, bf16): the CPU reference's mask, bit for
// bit (src/device/cuda/kernels/dropout_kernels.cu draws from the same Philox
// stream at the same counters); keep = 1 / (1 - rate) converted on the host as
// the reference converts it. dropout itself is x * mask, an elementwise mul.
#include "nimbus/ops/registry.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/cuda_stream.h"
#include "src/device/cuda/kernels/dropout_kernels.h"
#include "src/kernels/cuda/value_pattern.h"

namespace nimbus::cuda {
namespace {

void dropout_mask(KernelContext& ctx) {
  Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  const double rate = ctx.attrs.get_float("rate");
  CudaStream& stream = cuda_stream(ctx.stream);
  NIMBUS_CUDA_CHECK(kernels::dropout_mask(out.raw_data(), out.numel(), static_cast<int>(dtype_size(out.dtype())),
                                          static_cast<uint64_t>(ctx.attrs.get_int("seed")),
                                          static_cast<uint64_t>(ctx.attrs.get_int("offset")), rate,
                                          value_pattern(out.dtype(), 1 / (1 - rate)), value_pattern(out.dtype(), 0),
                                          multiprocessor_count(stream.device().index), stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH("dropout_mask", stream);
}

const bool kRegistered =
    register_kernel("dropout_mask", {.name = "cuda",
                                     .device = DeviceType::kCUDA,
                                     .dtypes = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16},
                                     .priority = 1,
                                     .fn = dropout_mask});

}  // namespace
}  // namespace nimbus::cuda
