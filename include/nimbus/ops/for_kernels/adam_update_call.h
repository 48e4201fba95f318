// The inputs of an adam_update call (src/ops/adam_update.cc), for its kernels:
// weights, m, v and gradients (count tensors each), then alpha and decay (f64
// scalars), then optionally `apply` (a bool scalar).
#pragma once

#include <cstddef>
#include <span>

#include "nimbus/ops/attrs.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus::internal {

struct AdamUpdateCall {
  AdamUpdateCall(std::span<const Tensor> inputs, const Attrs& attrs)
      : inputs(inputs), count(static_cast<size_t>(attrs.get_int("count"))) {}

  const Tensor& weight(size_t i) const { return inputs[i]; }
  const Tensor& m(size_t i) const { return inputs[count + i]; }
  const Tensor& v(size_t i) const { return inputs[2 * count + i]; }
  const Tensor& gradient(size_t i) const { return inputs[3 * count + i]; }
  const Tensor& alpha() const { return inputs[4 * count]; }
  const Tensor& decay() const { return inputs[4 * count + 1]; }
  bool has_apply() const { return inputs.size() == 4 * count + 3; }
  const Tensor& apply() const { return inputs[4 * count + 2]; }

  std::span<const Tensor> inputs;
  size_t count;
};

}  // namespace nimbus::internal
