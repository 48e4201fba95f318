// Weight initializers and regularizers, by their Keras names.
//
//   Tensor w = Initializer{"glorot_uniform"}.make({784, 256});   // U(-limit, limit), limit = sqrt(6 / (fan_in +
//   fan_out)) Tensor k = Initializer{"he_normal", 42}.make({3, 3, 1, 32});  // truncated normal, stddev sqrt(2 /
//   fan_in) Regularizer reg = L2(1e-4);                                   // adds 1e-4 * sum(w^2) to the loss
//
// Fans follow Keras: for a kernel (..., fan_in, fan_out) with receptive field
// r (the product of the leading axes, 1 for a dense kernel), fan_in = r *
// shape[-2] and fan_out = r * shape[-1]; a vector has fan_in = fan_out = its
// length.
//
// Random initializers draw from Philox: with a seed the values depend only on
// it; without one they come from the default generator (runtime.seed), so a
// seeded run builds the same weights every time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "nimbus/base/dtype.h"
#include "nimbus/base/shape.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus::nn {

struct Initializer {
  // glorot_uniform, glorot_normal, he_normal, he_uniform, uniform ([-0.05, 0.05)), zeros, ones.
  std::string name = "glorot_uniform";
  std::optional<uint64_t> seed{};

  Initializer() = default;
  Initializer(const char* name_) : name(name_) {}  // NOLINT: "zeros" reads like Keras
  Initializer(std::string name_, std::optional<uint64_t> seed_ = std::nullopt) : name(std::move(name_)), seed(seed_) {}

  // A new tensor of this shape; an unknown name is an InvalidArgument listing the known ones.
  Tensor make(const Shape& shape, DType dtype = DType::kF32) const;
};

// (fan_in, fan_out) of a weight of this shape, as Keras computes them.
std::pair<double, double> compute_fans(const Shape& shape);

// Weight penalties added to the training loss: l1 * sum(|w|) + l2 * sum(w^2).
struct Regularizer {
  double l1 = 0;
  double l2 = 0;
  bool active() const { return l1 != 0 || l2 != 0; }
  Tensor penalty(const Tensor& weight) const;
};

inline Regularizer L2(double l2) { return {.l1 = 0, .l2 = l2}; }
inline Regularizer L1(double l1) { return {.l1 = l1, .l2 = 0}; }

}  // namespace nimbus::nn
