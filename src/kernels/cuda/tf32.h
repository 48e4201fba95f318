// Whether f32 matmuls and convolutions may run on TF32 Tensor Cores (10-bit
// mantissa inputs, f32 accumulation): off by default, so f32 results stay
// within 1e-5 of the CPU; runtime.allow_tf32 or NIMBUS_CUDA_TF32=1 turns it on
// (errors around 3e-4, eight times the f32 rate on an H200).
#pragma once

namespace nimbus::cuda {

bool tf32_allowed();

}  // namespace nimbus::cuda
