// adam_update on the CPU: the reference kernel's loop (adam_update_elements),
// each large tensor split over the compute pool. Above the reference kernel's
// priority, so AdamOptions::fused left unset takes it on the CPU: one pass over
// each weight, m, v and gradient instead of the unfused update's chain of
// about ten ops, each reading and writing whole tensors. Every element gets
// the same operations as in the reference kernel, so the results are the same
// bit for bit.
#include <type_traits>

#include "nimbus/ops/for_kernels/adam_update_call.h"
#include "nimbus/ops/registry.h"
#include "src/kernels/cpu/parallel.h"

namespace nimbus::cpu {
namespace {

template <typename T>
void run_adam_update(KernelContext& ctx) {
  const internal::AdamUpdateCall call(ctx.inputs, ctx.attrs);
  if (call.has_apply() && !call.apply().item<bool>()) return;
  const internal::AdamUpdateScalars<T> scalars(call, ctx.attrs);
  for (size_t i = 0; i < call.count; ++i) {
    // Written in place: the kernel's inputs are the variables' own tensors.
    auto* w = static_cast<T*>(call.weight(i).raw_data());
    auto* m = static_cast<T*>(call.m(i).raw_data());
    auto* v = static_cast<T*>(call.v(i).raw_data());
    const auto* g = static_cast<const T*>(call.gradient(i).raw_data());
    parallel_for(
        call.weight(i).numel(), kMemoryBoundGrain,
        [&](int64_t begin, int64_t end) { internal::adam_update_elements(w, m, v, g, begin, end, scalars); },
        64 / static_cast<int64_t>(sizeof(T)));
  }
}

const bool kAdamUpdateRegistered = register_kernel("adam_update", {.name = "vectorized",
                                                                   .device = DeviceType::kCPU,
                                                                   .dtypes = {DType::kF32, DType::kF64},
                                                                   .priority = 50,
                                                                   .fn = [](KernelContext& ctx) {
                                                                     if (ctx.inputs[0].dtype() == DType::kF32) {
                                                                       run_adam_update<float>(ctx);
                                                                     } else {
                                                                       run_adam_update<double>(ctx);
                                                                     }
                                                                   }});

}  // namespace
}  // namespace nimbus::cpu
