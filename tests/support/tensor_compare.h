// Comparisons of tensors for tests: bit for bit, and by relative error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>

#include "nimbus/tensor/tensor.h"

namespace nimbus::testing {

inline bool bit_identical(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// ||a - b|| / ||b|| over all elements, in f64.
inline double relative_error(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to(DType::kF64).to_vector<double>();
  const std::vector<double> y = b.to(DType::kF64).to_vector<double>();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
    diff += (x[i] - y[i]) * (x[i] - y[i]);
    norm += y[i] * y[i];
  }
  return x.size() != y.size() ? INFINITY : std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

}  // namespace nimbus::testing
