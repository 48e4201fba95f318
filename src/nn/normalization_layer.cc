// Keras's Normalization preprocessing layer and its adapt().
#include <fmt/format.h>

#include <algorithm>

#include "nimbus/base/error.h"
#include "nimbus/nn/layers.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/shape_ops.h"
#include "src/nn/internal/layer_support.h"

namespace nimbus::nn {

using namespace internal;

namespace {

// Keras's backend.epsilon(): the smallest standard deviation divided by.
constexpr double kEpsilon = 1e-7;

class NormalizationLayer : public LayerImpl {
 public:
  explicit NormalizationLayer(NormalizationOptions options)
      : LayerImpl("Normalization", name_or(options.name, "normalization")), options_(std::move(options)) {
    if (options_.mean.has_value() != options_.variance.has_value()) {
      throw InvalidArgument("Normalization: give both mean and variance, or neither (and call adapt)");
    }
    if (options_.variance) {
      for (double v : *options_.variance) {
        if (!(v >= 0)) throw InvalidArgument(fmt::format("Normalization: variance {} is negative", v));
      }
    }
  }

  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override {
    const Dims& x = inputs[0];
    const Dims stats = stats_shape(x);
    int64_t count = 1;
    for (int64_t d : stats) {
      if (d < 0) {
        throw InvalidArgument(
            fmt::format("the axes it keeps {} must have known sizes in its input {}", format_axis(), format_dims(x)));
      }
      count *= d;
    }
    for (const auto& values : {options_.mean, options_.variance}) {
      if (values && values->size() != 1 && static_cast<int64_t>(values->size()) != count) {
        throw InvalidArgument(fmt::format("mean and variance need 1 or {} values for its input {} (axis {}), got {}",
                                          count, format_dims(x), format_axis(), values->size()));
      }
    }
    if (built() && mean_.defined() && mean_.shape().to_vector() != stats) {
      throw InvalidArgument(fmt::format("was built for statistics of shape {}, its input {} needs {}",
                                        mean_.shape().to_string(), format_dims(x), format_dims(stats)));
    }
    return {x};
  }

  void build(const std::vector<Dims>& inputs) override {
    const Dims stats = stats_shape(inputs[0]);
    broadcast_shape_ = broadcast_shape(inputs[0]);
    if (options_.mean) {
      // Given statistics are constants of the model, not weights (as in Keras).
      fixed_mean_ = filled(*options_.mean, Shape(stats));
      fixed_variance_ = filled(*options_.variance, Shape(stats));
      return;
    }
    mean_ = add_weight("mean", Shape(stats), "zeros", false);
    variance_ = add_weight("variance", Shape(stats), "ones", false);
  }

  nlohmann::json get_config() const override {
    auto values = [](const std::optional<std::vector<double>>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
    return {{"name", name()},
            {"axis", options_.axis},
            {"mean", values(options_.mean)},
            {"variance", values(options_.variance)},
            {"invert", options_.invert}};
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool) override {
    Tensor x = inputs[0];
    if (!is_floating(x.dtype())) x = cast(x, floatx());
    const Tensor mean = reshape(cast(options_.mean ? fixed_mean_ : mean_.value(), x.dtype()), broadcast_shape_);
    const Tensor variance =
        reshape(cast(options_.mean ? fixed_variance_ : variance_.value(), x.dtype()), broadcast_shape_);
    const Tensor scale = maximum(sqrt(variance), full(Shape{}, kEpsilon, x.dtype()));
    return {options_.invert ? mean + x * scale : (x - mean) / scale};
  }

  void adapt(const Tensor& data) {
    if (options_.mean) {
      throw InvalidArgument(
          fmt::format("Normalization '{}' was given its mean and variance; adapt() computes them "
                      "only for a layer made without",
                      name()));
    }
    if (data.rank() < 1 || data.dim(0) == 0) {
      throw InvalidArgument(fmt::format("Normalization '{}': adapt() needs a batch of samples, got {}", name(),
                                        data.shape().to_string()));
    }
    Dims dims = data.shape().to_vector();
    dims[0] = -1;
    try {
      if (!built()) ensure_built({dims});
      (void)compute_output_shapes({dims});
    } catch (const Error& error) {
      throw InvalidArgument(
          fmt::format("Normalization '{}': adapt() on data {}: {}", name(), data.shape().to_string(), error.message()),
          error.hint());
    }
    const std::vector<int64_t> keep = kept_axes(data.rank());
    std::vector<int64_t> reduce;
    for (int64_t axis = 0; axis < data.rank(); ++axis) {
      if (std::find(keep.begin(), keep.end(), axis) == keep.end()) reduce.push_back(axis);
    }
    Tensor x = data.to(mean_.dtype());
    mean_.assign(mean(x, reduce));
    variance_.assign(variance(x, reduce));
  }

 private:
  // The kept axes as non-negative indices of an input of this rank; axis 0 (the batch) cannot be kept.
  std::vector<int64_t> kept_axes(int64_t rank) const {
    std::vector<int64_t> keep;
    for (int64_t axis : options_.axis) {
      const int64_t positive = axis < 0 ? axis + rank : axis;
      if (positive <= 0 || positive >= rank) {
        throw InvalidArgument(
            fmt::format("axis {} is out of range for inputs of rank {} (the batch axis 0 cannot "
                        "be kept)",
                        axis, rank));
      }
      keep.push_back(positive);
    }
    std::sort(keep.begin(), keep.end());
    return keep;
  }
  Dims stats_shape(const Dims& x) const {
    Dims stats;
    for (int64_t axis : kept_axes(static_cast<int64_t>(x.size()))) stats.push_back(x[static_cast<size_t>(axis)]);
    return stats;
  }
  // The statistics reshaped to broadcast against a batch: 1 on every reduced axis.
  Shape broadcast_shape(const Dims& x) const {
    std::vector<int64_t> shape(x.size(), 1);
    for (int64_t axis : kept_axes(static_cast<int64_t>(x.size()))) {
      shape[static_cast<size_t>(axis)] = x[static_cast<size_t>(axis)];
    }
    return Shape(shape);
  }
  std::string format_axis() const { return options_.axis.empty() ? "None" : nlohmann::json(options_.axis).dump(); }
  // A constant of this shape from one value (repeated) or one value per element.
  static Tensor filled(const std::vector<double>& values, const Shape& shape) {
    std::vector<double> all(static_cast<size_t>(shape.numel()), values[0]);
    if (values.size() > 1) all = values;
    return Tensor::from_vector<double>(all, shape).to(floatx());
  }

  NormalizationOptions options_;
  Shape broadcast_shape_;
  Tensor fixed_mean_, fixed_variance_;
  Variable mean_, variance_;
};

}  // namespace

Layer Normalization(const NormalizationOptions& options) { return make_layer<NormalizationLayer>(options); }

void adapt(const Layer& normalization, const Tensor& data) {
  auto* layer = dynamic_cast<NormalizationLayer*>(normalization.impl().get());
  if (layer == nullptr) {
    throw InvalidArgument(fmt::format("adapt: layer '{}' is a {}, not a Normalization", normalization.name(),
                                      normalization->class_name()));
  }
  layer->adapt(data);
}

}  // namespace nimbus::nn
