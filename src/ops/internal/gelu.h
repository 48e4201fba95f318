// GELU and its derivative in both forms, for any floating compute type.
// Shared by the reference kernels and the vectorized CPU kernels' tests. Internal.
#pragma once

#include <cmath>
#include <numbers>

namespace nimbus::internal {

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
template <typename C>
C gelu_tanh(C x) {
  const C k = C(std::sqrt(2.0 / std::numbers::pi));
  return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
}

template <typename C>
C gelu_tanh_derivative(C x) {
  const C k = C(std::sqrt(2.0 / std::numbers::pi));
  const C t = std::tanh(k * (x + C(0.044715) * x * x * x));
  return C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * k * (C(1) + C(3 * 0.044715) * x * x);
}

// x Phi(x) = 0.5 x (1 + erf(x / sqrt(2)))
template <typename C>
C gelu_erf(C x) {
  return C(0.5) * x * (C(1) + std::erf(x * C(1.0 / std::numbers::sqrt2)));
}

// Phi(x) + x phi(x)
template <typename C>
C gelu_erf_derivative(C x) {
  const C cdf = C(0.5) * (C(1) + std::erf(x * C(1.0 / std::numbers::sqrt2)));
  const C pdf = std::exp(C(-0.5) * x * x) * C(1.0 / std::sqrt(2.0 * std::numbers::pi));
  return cdf + x * pdf;
}

}  // namespace nimbus::internal
