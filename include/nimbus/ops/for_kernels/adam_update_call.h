// The inputs of an adam_update call (src/ops/adam_update.cc), for its kernels:
// weights, m, v and gradients (count tensors each), then alpha and decay (f64
// scalars), then optionally `apply` (a bool scalar).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
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

// The scalars of an adam_update call in the weights' dtype T.
template <typename T>
struct AdamUpdateScalars {
  AdamUpdateScalars(const AdamUpdateCall& call, const Attrs& attrs)
      : weight_decay(attrs.get_bool("weight_decay")),
        decay(static_cast<T>(call.decay().item<double>())),
        alpha(static_cast<T>(call.alpha().item<double>())),
        one_minus_beta_1(static_cast<T>(1 - attrs.get_float("beta_1"))),
        one_minus_beta_2(static_cast<T>(1 - attrs.get_float("beta_2"))),
        epsilon(static_cast<T>(attrs.get_float("epsilon"))) {}

  bool weight_decay;
  T decay, alpha, one_minus_beta_1, one_minus_beta_2, epsilon;
};

// Elements [begin, end) of one (w, m, v, g) tensor quadruple, in place: the operations of
// train::AdamOptimizer's unfused update in its order, each rounded to T. A file that calls it is
// compiled with -ffp-contract=off (src/CMakeLists.txt), or FMAs would change the last bits, and
// -fno-math-errno, or std::sqrt keeps the loop scalar. The four tensors never overlap.
template <typename T>
void adam_update_elements(T* __restrict w, T* __restrict m, T* __restrict v, const T* __restrict g, int64_t begin,
                          int64_t end, const AdamUpdateScalars<T>& s) {
  for (int64_t i = begin; i < end; ++i) {
    T weight = w[i];
    if (s.weight_decay) weight = weight - weight * s.decay;
    const T new_m = m[i] + (g[i] - m[i]) * s.one_minus_beta_1;
    const T new_v = v[i] + (g[i] * g[i] - v[i]) * s.one_minus_beta_2;
    m[i] = new_m;
    v[i] = new_v;
    w[i] = weight - new_m * s.alpha / (std::sqrt(new_v) + s.epsilon);
  }
}

}  // namespace nimbus::internal
