#include "nimbus/nn/initializers.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "nimbus/base/error.h"
#include "nimbus/base/rng.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/reduction.h"

namespace nimbus::nn {

std::pair<double, double> compute_fans(const Shape& shape) {
  if (shape.rank() == 0) return {1, 1};
  if (shape.rank() == 1) return {double(shape[0]), double(shape[0])};
  double receptive_field = 1;
  for (int i = 0; i < shape.rank() - 2; ++i) receptive_field *= double(shape[i]);
  return {receptive_field * double(shape[-2]), receptive_field * double(shape[-1])};
}

Tensor Initializer::make(const Shape& shape, DType dtype) const {
  const auto count = static_cast<size_t>(shape.numel());
  std::vector<double> values(count);
  if (name == "zeros" || name == "ones") {
    std::fill(values.begin(), values.end(), name == "ones" ? 1.0 : 0.0);
  } else {
    // Initializers run once, on the host: the draws are cheap next to training
    // and a host loop gives truncation by resampling, which an op cannot.
    uint64_t stream = 0, offset = 0;
    if (seed) {
      stream = *seed;
    } else {
      Generator& generator = default_generator();
      stream = generator.seed();
      offset = generator.reserve(4 * count + 1);
    }
    const auto [fan_in, fan_out] = compute_fans(shape);
    auto uniform = [&](double limit) {
      for (size_t i = 0; i < count; ++i) values[i] = limit * (2 * philox_uniform_double(stream, offset + i) - 1);
    };
    // Normal truncated at two standard deviations (redrawn beyond), scaled so
    // the result has the wanted deviation, as Keras's VarianceScaling does.
    auto truncated_normal = [&](double stddev) {
      const double scale = stddev / 0.87962566103423978;
      uint64_t next = offset;
      for (size_t i = 0; i < count; ++i) {
        double z = 0;
        do {
          z = philox_normal(stream, next++);
        } while (std::abs(z) > 2);
        values[i] = z * scale;
      }
    };
    if (name == "glorot_uniform") {
      uniform(std::sqrt(6.0 / (fan_in + fan_out)));
    } else if (name == "glorot_normal") {
      truncated_normal(std::sqrt(2.0 / (fan_in + fan_out)));
    } else if (name == "he_normal") {
      truncated_normal(std::sqrt(2.0 / fan_in));
    } else if (name == "he_uniform") {
      uniform(std::sqrt(6.0 / fan_in));
    } else if (name == "uniform") {
      uniform(0.05);  // Keras's RandomUniform default, [-0.05, 0.05)
    } else {
      throw InvalidArgument(fmt::format("unknown initializer '{}'", name),
                            "use one of glorot_uniform, glorot_normal, he_normal, he_uniform, uniform, zeros, ones");
    }
  }
  Tensor result = Tensor::from_vector<double>(values, shape);
  return dtype == DType::kF64 ? result : result.to(dtype);
}

Tensor Regularizer::penalty(const Tensor& weight) const {
  Tensor total;
  if (l2 != 0) total = sum(square(weight)) * l2;
  if (l1 != 0) {
    Tensor l1_term = sum(abs(weight)) * l1;
    total = total.defined() ? total + l1_term : l1_term;
  }
  return total;
}

}  // namespace nimbus::nn
