// Matrix multiplication through oneDNN on the CPU.
//
//   matmul(x, w);                          // (M, K) @ (K, N) -> (M, N)
//   matmul(q, k, false, true);             // (B, H, T, D) @ (B, H, T, D)^T -> (B, H, T, T)
//   matmul(x, w, true, false);             // x^T @ w, without materializing x^T
//
// Batch dimensions (all but the last two) broadcast like NumPy's.
#pragma once

#include "nimbus/tensor/tensor.h"

namespace nimbus {

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

}  // namespace nimbus
