// Reductions over any set of axes, and softmax.
//
//   sum(x);                         // all axes -> rank 0
//   mean(x, {0});                   // (N, D) -> (D)
//   reduce_max(x, {-1}, true);      // (N, D) -> (N, 1)
//   argmax(x, -1);                  // (N, D) -> (N), i64
//   softmax(logits);                // over the last axis, max-subtracted for stability
//
// An empty `axes` list reduces every axis. Negative axes count from the end.
#pragma once

#include <cstdint>
#include <vector>

#include "nimbus/tensor/tensor.h"

namespace nimbus {

Tensor sum(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
Tensor reduce_max(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
Tensor reduce_min(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
// Population variance (divides by N), like tf.math.reduce_variance.
Tensor variance(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
// Index of the first maximum along `axis` (i64).
Tensor argmax(const Tensor& x, int64_t axis = -1, bool keepdims = false);

Tensor softmax(const Tensor& x, int64_t axis = -1);
Tensor log_softmax(const Tensor& x, int64_t axis = -1);

// Sums `grad` over the axes that broadcasting added or stretched, so that the
// result has `shape`: the gradient of broadcast_to(x, grad.shape()) w.r.t. x.
Tensor reduce_to_shape(const Tensor& grad, const Shape& shape);

}  // namespace nimbus
