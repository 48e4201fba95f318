// The activations a fused contraction (fused_matmul, fused_conv2d) may end
// with, by the name its "activation" attribute gives (kMatmulActivations).
// Internal.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/op_schema.h"

namespace nimbus::internal {

// Fails the inference of an op whose "activation" attribute is not one of them.
inline void check_fusable_activation(const InferContext& ctx) {
  const std::string& activation = ctx.attrs.get_string("activation");
  if (std::find(kMatmulActivations.begin(), kMatmulActivations.end(), activation) == kMatmulActivations.end()) {
    ctx.fail(fmt::format("unknown activation \"{}\": none, relu, sigmoid, tanh, gelu_tanh or gelu_erf", activation));
  }
}

inline Tensor activate(const Tensor& x, const std::string& activation) {
  if (activation == "relu") return relu(x);
  if (activation == "sigmoid") return sigmoid(x);
  if (activation == "tanh") return tanh(x);
  if (activation == "gelu_tanh") return gelu(x, "tanh");
  if (activation == "gelu_erf") return gelu(x, "none");
  return x;
}

}  // namespace nimbus::internal
