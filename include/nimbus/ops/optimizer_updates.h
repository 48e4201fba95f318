// Optimizer updates as ops: one call updates every tensor of a group in place
// (PyTorch's fused Adam, apex's FusedAdam). train::Adam and train::AdamW call it
// when fused (AdamOptions::fused); it computes exactly what their unfused ops do.
//
//   // weights, m, v, gradients: one tensor per parameter, all of one dtype and device
//   adam_update(weights, m, v, gradients, alpha, decay, {.beta_1 = 0.9, .beta_2 = 0.999, .epsilon = 1e-7});
//
// Per element, in the weights' dtype (alpha and decay are f64 scalars, rounded to it first):
//   w = w - w * decay                                  (only with weight_decay: AdamW's decoupled decay)
//   m = m + (g - m) * (1 - beta_1)
//   v = v + (g * g - v) * (1 - beta_2)
//   w = w - m * alpha / (sqrt(v) + epsilon)
// with alpha = lr sqrt(1 - beta_2^t) / (1 - beta_1^t) and decay = lr * weight_decay.
#pragma once

#include <span>

#include "nimbus/tensor/tensor.h"

namespace nimbus {

struct AdamUpdateOptions {
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  bool weight_decay = false;  // apply w -= w * decay first
};

// Updates weights[i], m[i] and v[i] in place from gradients[i], for every i, in one op (and on CUDA
// in one kernel launch per 64 tensors). `apply`, a bool scalar, may be undefined; when false the
// call changes nothing (a loss-scaled step with an inf gradient). In a traced function the call is
// a node with side effects, kept in program order like assign.
void adam_update(std::span<const Tensor> weights, std::span<const Tensor> m, std::span<const Tensor> v,
                 std::span<const Tensor> gradients, const Tensor& alpha, const Tensor& decay,
                 const AdamUpdateOptions& options, const Tensor& apply = {});

}  // namespace nimbus
