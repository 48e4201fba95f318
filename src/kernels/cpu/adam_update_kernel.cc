// adam_update on the CPU: the reference kernel's loop (adam_update_elements),
// all the weights' elements split over the compute pool at once. Above the reference kernel's
// priority, so AdamOptions::fused left unset takes it on the CPU: one pass over
// each weight, m, v and gradient instead of the unfused update's chain of
// about ten ops, each reading and writing whole tensors. Every element gets
// the same operations as in the reference kernel, so the results are the same
// bit for bit.
#include <algorithm>
#include <type_traits>
#include <vector>

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
  // The weights' elements in a row, each weight from a cache line's boundary: one split of them all over
  // the compute pool, so a step forks the pool once for its whole update (each fork wakes sleeping workers)
  // and no two threads write one cache line.
  constexpr int64_t kLine = 64 / static_cast<int64_t>(sizeof(T));
  std::vector<int64_t> starts(call.count + 1, 0);
  for (size_t i = 0; i < call.count; ++i) {
    starts[i + 1] = starts[i] + (call.weight(i).numel() + kLine - 1) / kLine * kLine;
  }
  parallel_for(
      starts.back(), kMemoryBoundGrain,
      [&](int64_t begin, int64_t end) {
        for (size_t i = 0; i < call.count; ++i) {
          const int64_t first = std::max(begin, starts[i]) - starts[i];
          const int64_t last = std::min({end, starts[i + 1], starts[i] + call.weight(i).numel()}) - starts[i];
          if (first >= last) continue;
          // Written in place: the kernel's inputs are the variables' own tensors.
          internal::adam_update_elements(static_cast<T*>(call.weight(i).raw_data()),
                                         static_cast<T*>(call.m(i).raw_data()), static_cast<T*>(call.v(i).raw_data()),
                                         static_cast<const T*>(call.gradient(i).raw_data()), first, last, scalars);
        }
      },
      kLine);
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
