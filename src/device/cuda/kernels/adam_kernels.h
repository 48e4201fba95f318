// The launcher of adam_update's CUDA kernel (src/kernels/cuda/adam_update_ops.cc).
// Plain C++17 with the runtime's types only, like kernels.h; returns the
// launch's status (cudaGetLastError) for the caller's check.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace nimbus::cuda::kernels {

// One parameter: its weight, slots and gradient, `size` f32 elements each.
struct AdamTensor {
  float* weight = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  const float* gradient = nullptr;
  int64_t size = 0;
};

// The update's scalars: alpha and decay are f64 scalars in device memory (the optimizer computes
// them on the device from its step counter), rounded to f32 as the unfused ops' casts do; `apply`
// (a bool in device memory, or null) turns the whole update off.
struct AdamScalars {
  const double* alpha = nullptr;
  const double* decay = nullptr;
  const bool* apply = nullptr;
  float one_minus_beta_1 = 0;
  float one_minus_beta_2 = 0;
  float epsilon = 0;
  bool weight_decay = false;
};

// The tensors a launch takes by value in its argument (under the 4 KiB every architecture accepts).
inline constexpr int kAdamTensorsPerLaunch = 64;

// Adam / AdamW over `count` tensors: one launch per kAdamTensorsPerLaunch tensors, each block one
// chunk of one tensor (multi-tensor apply). Per element, each operation rounded to f32 without
// contraction into FMAs, as the CPU reference computes it.
cudaError_t adam_update(const AdamTensor* tensors, int count, const AdamScalars& scalars, cudaStream_t stream);

}  // namespace nimbus::cuda::kernels
