// Matrix multiplication through oneDNN on the CPU.
//
//   matmul(x, w);                          // (M, K) @ (K, N) -> (M, N)
//   matmul(q, k, false, true);             // (B, H, T, D) @ (B, H, T, D)^T -> (B, H, T, T)
//   matmul(x, w, true, false);             // x^T @ w, without materializing x^T
//
// Batch dimensions (all but the last two) broadcast like NumPy's.
//
//   fused_matmul(x, w, bias, "relu");      // relu(x @ w + bias) in one kernel
//
// fused_matmul is what graph fusion makes of a matmul followed by a bias add
// and an activation (oneDNN's bias and post-op); the activation is one of
// the fused names in activation_table.h.
#pragma once

#include <string>

#include "nimbus/tensor/tensor.h"

namespace nimbus {

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

// activation(op(a) @ op(b) + bias), bias of shape [n]; not differentiable
// (graph fusion makes it after the gradients are built).
Tensor fused_matmul(const Tensor& a, const Tensor& b, const Tensor& bias, const std::string& activation,
                    bool transpose_a = false, bool transpose_b = false);

}  // namespace nimbus
