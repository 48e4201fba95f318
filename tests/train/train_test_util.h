// Helpers shared by the train tests: host copies, relative errors, and
// central finite differences in f64.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "nimbus/autodiff/variable.h"
#include "nimbus/base/error.h"
#include "nimbus/base/rng.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/creation.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus::testing {

inline std::vector<double> values_of(const Tensor& t) { return t.to_vector<double>(); }

// max |a - e| / max(1e-12, max |e|) over the tensors; NaN anywhere counts as infinite.
inline double relative_error(const std::vector<double>& actual, const std::vector<double>& expected) {
  if (actual.size() != expected.size()) return INFINITY;
  double diff = 0, scale = 1e-12;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(actual[i]) || std::isnan(expected[i])) return INFINITY;
    diff = std::max(diff, std::abs(actual[i] - expected[i]));
    scale = std::max(scale, std::abs(expected[i]));
  }
  return diff / scale;
}

inline double relative_error(const Tensor& actual, const Tensor& expected) {
  if (actual.shape() != expected.shape()) return INFINITY;
  return relative_error(values_of(actual), values_of(expected));
}

// Standard normal values from a fixed seed.
inline Tensor random_input(const Shape& shape, DType dtype = DType::kF32, uint64_t seed = 7) {
  Generator generator(seed);
  return random_normal(shape, 0, 1, dtype, Device::cpu(), &generator);
}

// The message of the nimbus::Error `body` throws, or "(no error)".
inline std::string error_message(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return std::string(error.what());
  }
  return "(no error)";
}

// Every weight of the model, flattened in order.
inline std::vector<double> flat_weights(const nn::Model& model) {
  std::vector<double> all;
  for (const Variable& v : model.weights()) {
    const std::vector<double> values = values_of(v.value());
    all.insert(all.end(), values.begin(), values.end());
  }
  return all;
}

// ||a - b|| / ||b|| (L2 over all elements).
inline double relative_norm_error(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::sqrt(diff) / std::sqrt(norm);
}

// d loss / d variable by central differences (variables must be f64).
inline std::vector<double> numeric_gradient(Variable variable, const std::function<double()>& loss,
                                            double step = 1e-6) {
  const Tensor original = variable.value().clone();
  std::vector<double> values = values_of(original);
  std::vector<double> gradient(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    std::vector<double> shifted = values;
    shifted[i] = values[i] + step;
    variable.assign(Tensor::from_vector<double>(shifted, original.shape()));
    const double up = loss();
    shifted[i] = values[i] - step;
    variable.assign(Tensor::from_vector<double>(shifted, original.shape()));
    const double down = loss();
    gradient[i] = (up - down) / (2 * step);
  }
  variable.assign(original);
  return gradient;
}

// Keeps the weights' dtype at f64 for one test.
struct Float64Weights {
  Float64Weights();
  ~Float64Weights();
};

}  // namespace nimbus::testing
