// The built-in layers. Each checks its input shapes in compute_output_shapes
// (the messages name the shapes; apply_symbolic adds the layer and its index).
#include "nimbus/nn/layers.h"

#include <fmt/format.h>

#include <memory>

#include "nimbus/base/error.h"
#include "nimbus/base/rng.h"
#include "nimbus/ops/activation_table.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/shape_ops.h"
#include "src/nn/internal/layer_support.h"

namespace nimbus::nn {

Tensor apply_activation(const std::string& activation, const Tensor& x) {
  return nimbus::apply_activation(activation_from_keras_name(activation), x);
}

namespace internal {

void check_activation(const std::string& activation) {
  // Validates the name at construction, long before the first batch.
  (void)activation_from_keras_name(activation);
}

std::string name_or(const std::string& name, const char* prefix) {
  return name.empty() ? unique_layer_name(prefix) : name;
}

// The config keys Dense and Conv2D share: activation, bias and the kernel's
// initializer and regularizer (their options structs name them alike).
template <typename Options>
nlohmann::json kernel_layer_config(const Options& options) {
  return {{"activation", options.activation},
          {"use_bias", options.use_bias},
          {"kernel_initializer", initializer_to_json(options.kernel_initializer)},
          {"bias_initializer", initializer_to_json(options.bias_initializer)},
          {"kernel_regularizer", regularizer_to_json(options.kernel_regularizer)}};
}

void check_rank(const Dims& dims, int rank, const char* what, const char* hint) {
  if (static_cast<int>(dims.size()) != rank) {
    throw InvalidArgument(
        fmt::format("expects a rank-{} input {}, got rank {} {}", rank, what, dims.size(), format_dims(dims)), hint);
  }
}

int64_t known_last_dim(const Dims& dims, const char* what) {
  if (dims.empty() || dims.back() < 0) {
    throw InvalidArgument(fmt::format("the last dimension of its input {} must be known ({})", format_dims(dims), what),
                          "give Input() the full shape of a sample");
  }
  return dims.back();
}

int64_t window_output(int64_t input, int64_t window, int64_t stride, const std::string& padding) {
  if (input < 0) return -1;
  if (padding == "same") return (input + stride - 1) / stride;
  return input < window ? 0 : (input - window) / stride + 1;
}

void check_padding(const std::string& padding) {
  if (padding != "valid" && padding != "same") {
    throw InvalidArgument(fmt::format("padding must be 'valid' or 'same', got '{}'", padding));
  }
}

}  // namespace internal

using namespace internal;

namespace {

// ---- Dense ----

class DenseLayer : public LayerImpl {
 public:
  DenseLayer(int64_t units, DenseOptions options)
      : LayerImpl("Dense", name_or(options.name, "dense")), units_(units), options_(std::move(options)) {
    if (units <= 0) throw InvalidArgument(fmt::format("Dense: units must be positive, got {}", units));
    check_activation(options_.activation);
  }
  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override {
    if (inputs[0].size() < 2) {
      throw InvalidArgument(
          fmt::format("expects an input of rank >= 2 (batch, ..., features), got {}", format_dims(inputs[0])),
          "add Flatten() or Reshape() before it");
    }
    const int64_t features = known_last_dim(inputs[0], "the kernel's first dimension");
    if (kernel_.defined() && kernel_.shape()[0] != features) {
      throw InvalidArgument(
          fmt::format("was built for inputs with {} features, got {}", kernel_.shape()[0], format_dims(inputs[0])),
          "a shared layer needs inputs of one feature size; use a separate Dense");
    }
    Dims out = inputs[0];
    out.back() = units_;
    return {out};
  }
  void build(const std::vector<Dims>& inputs) override {
    kernel_ = add_weight("kernel", Shape{inputs[0].back(), units_}, options_.kernel_initializer, true,
                         options_.kernel_regularizer);
    if (options_.use_bias) bias_ = add_weight("bias", Shape{units_}, options_.bias_initializer);
  }
  nlohmann::json get_config() const override {
    nlohmann::json config = kernel_layer_config(options_);
    config.update({{"name", name()}, {"units", units_}});
    return config;
  }
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool) override {
    const Tensor& x = inputs[0];
    // Inputs of rank > 2 run as (rows, features) through the bias, so that the graph's epilogue fusion sees
    // matmul -> add(bias) and gives the bias to the product (fused_matmul). The activation follows the
    // reshape back, as before: fusing it too is left to rank-2 inputs (a device may lack the fused form).
    Tensor y = matmul(x.rank() == 2 ? x : reshape(x, std::vector<int64_t>{-1, x.dim(-1)}), kernel_.value());
    if (options_.use_bias) y = y + bias_.value();
    if (x.rank() > 2) {
      Shape out_shape = x.shape();
      out_shape[-1] = units_;
      y = reshape(y, out_shape);
    }
    return {apply_activation(options_.activation, y)};
  }

 private:
  int64_t units_;
  DenseOptions options_;
  Variable kernel_, bias_;
};

// ---- Conv2D ----

// (N, H, W, C) -> (N, OH, OW, channels_out) of a 2-D convolution, or InvalidArgument when the
// input is not rank 4 or a "valid" kernel does not fit.
Dims conv2d_output_dims(const Dims& x, std::array<int64_t, 2> kernel_size, std::array<int64_t, 2> strides,
                        std::array<int64_t, 2> dilation_rate, const std::string& padding, int64_t channels_out) {
  check_rank(x, 4, "(batch, height, width, channels)", "reshape the input, e.g. Reshape({28, 28, 1}) before it");
  (void)known_last_dim(x, "the channels");
  Dims out = {x[0], 0, 0, channels_out};
  for (int i = 0; i < 2; ++i) {
    const int64_t window = (kernel_size[i] - 1) * dilation_rate[i] + 1;
    out[i + 1] = window_output(x[i + 1], window, strides[i], padding);
    if (out[i + 1] == 0) {
      throw InvalidArgument(fmt::format("kernel {}x{} is larger than its {}x{} input with padding 'valid'",
                                        kernel_size[0], kernel_size[1], x[1], x[2]),
                            "use padding 'same', a smaller kernel_size, or a larger input");
    }
  }
  return out;
}

// A built layer called again (a shared layer) must see the channel count its kernel was made for.
void check_built_channels(const Dims& x, int64_t built_channels) {
  if (built_channels >= 0 && !x.empty() && x.back() >= 0 && x.back() != built_channels) {
    throw InvalidArgument(fmt::format("was built for inputs with {} channels, got {}", built_channels, format_dims(x)),
                          "a shared layer needs inputs of one channel count; use a separate layer");
  }
}

class Conv2DLayer : public LayerImpl {
 public:
  Conv2DLayer(int64_t filters, std::array<int64_t, 2> kernel_size, Conv2DOptions options)
      : LayerImpl("Conv2D", name_or(options.name, "conv2d")),
        filters_(filters),
        kernel_size_(kernel_size),
        options_(std::move(options)) {
    if (filters <= 0 || kernel_size[0] <= 0 || kernel_size[1] <= 0) {
      throw InvalidArgument(fmt::format("Conv2D: filters and kernel_size must be positive, got {} and {}x{}", filters,
                                        kernel_size[0], kernel_size[1]));
    }
    check_padding(options_.padding);
    check_activation(options_.activation);
  }
  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override {
    const Dims& x = inputs[0];
    check_built_channels(x, kernel_.defined() ? kernel_.shape()[2] : -1);
    return {conv2d_output_dims(x, kernel_size_, options_.strides, options_.dilation_rate, options_.padding, filters_)};
  }
  void build(const std::vector<Dims>& inputs) override {
    kernel_ = add_weight("kernel", Shape{kernel_size_[0], kernel_size_[1], inputs[0][3], filters_},
                         options_.kernel_initializer, true, options_.kernel_regularizer);
    if (options_.use_bias) bias_ = add_weight("bias", Shape{filters_}, options_.bias_initializer);
  }
  nlohmann::json get_config() const override {
    nlohmann::json config = kernel_layer_config(options_);
    config.update({{"name", name()},
                   {"filters", filters_},
                   {"kernel_size", kernel_size_},
                   {"strides", options_.strides},
                   {"padding", options_.padding},
                   {"dilation_rate", options_.dilation_rate}});
    return config;
  }
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool) override {
    Tensor y = conv2d(inputs[0], kernel_.value(),
                      {.strides = options_.strides, .padding = options_.padding, .dilations = options_.dilation_rate});
    if (options_.use_bias) y = y + bias_.value();
    return {apply_activation(options_.activation, y)};
  }

 private:
  int64_t filters_;
  std::array<int64_t, 2> kernel_size_;
  Conv2DOptions options_;
  Variable kernel_, bias_;
};

// ---- DepthwiseConv2D ----

class DepthwiseConv2DLayer : public LayerImpl {
 public:
  DepthwiseConv2DLayer(std::array<int64_t, 2> kernel_size, DepthwiseConv2DOptions options)
      : LayerImpl("DepthwiseConv2D", name_or(options.name, "depthwise_conv2d")),
        kernel_size_(kernel_size),
        options_(std::move(options)) {
    if (kernel_size[0] <= 0 || kernel_size[1] <= 0 || options_.depth_multiplier <= 0) {
      throw InvalidArgument(
          fmt::format("DepthwiseConv2D: kernel_size and depth_multiplier must be positive, got {}x{} "
                      "and {}",
                      kernel_size[0], kernel_size[1], options_.depth_multiplier));
    }
    check_padding(options_.padding);
    check_activation(options_.activation);
  }
  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override {
    const Dims& x = inputs[0];
    check_built_channels(x, kernel_.defined() ? kernel_.shape()[2] : -1);
    const int64_t channels = x.size() == 4 ? x[3] : 0;
    return {conv2d_output_dims(x, kernel_size_, options_.strides, options_.dilation_rate, options_.padding,
                               channels * options_.depth_multiplier)};
  }
  void build(const std::vector<Dims>& inputs) override {
    const int64_t channels = inputs[0][3];
    kernel_ =
        add_weight("depthwise_kernel", Shape{kernel_size_[0], kernel_size_[1], channels, options_.depth_multiplier},
                   options_.depthwise_initializer, true, options_.depthwise_regularizer);
    if (options_.use_bias) {
      bias_ = add_weight("bias", Shape{channels * options_.depth_multiplier}, options_.bias_initializer);
    }
  }
  nlohmann::json get_config() const override {
    return {{"name", name()},
            {"kernel_size", kernel_size_},
            {"strides", options_.strides},
            {"padding", options_.padding},
            {"depth_multiplier", options_.depth_multiplier},
            {"dilation_rate", options_.dilation_rate},
            {"activation", options_.activation},
            {"use_bias", options_.use_bias},
            {"depthwise_initializer", initializer_to_json(options_.depthwise_initializer)},
            {"bias_initializer", initializer_to_json(options_.bias_initializer)},
            {"depthwise_regularizer", regularizer_to_json(options_.depthwise_regularizer)}};
  }
  // A grouped convolution with one group per input channel: the (KH, KW, C, M) kernel read as
  // (KH, KW, 1, C * M) puts filter m of channel c at output c * M + m, Keras's order.
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool) override {
    const Shape& k = kernel_.shape();
    const Tensor filter = reshape(kernel_.value(), Shape{k[0], k[1], 1, k[2] * k[3]});
    Tensor y = conv2d(inputs[0], filter,
                      {.strides = options_.strides,
                       .padding = options_.padding,
                       .dilations = options_.dilation_rate,
                       .groups = k[2]});
    if (options_.use_bias) y = y + bias_.value();
    return {apply_activation(options_.activation, y)};
  }

 private:
  std::array<int64_t, 2> kernel_size_;
  DepthwiseConv2DOptions options_;
  Variable kernel_, bias_;
};

// ---- pooling ----

class Pooling2DLayer : public LayerImpl {
 public:
  Pooling2DLayer(bool max, std::array<int64_t, 2> pool_size, const Pooling2DOptions& options)
      : LayerImpl(max ? "MaxPooling2D" : "AveragePooling2D",
                  name_or(options.name, max ? "max_pooling2d" : "average_pooling2d")),
        max_(max),
        pool_size_(pool_size),
        strides_(options.strides.value_or(pool_size)),
        padding_(options.padding) {
    if (pool_size[0] <= 0 || pool_size[1] <= 0 || strides_[0] <= 0 || strides_[1] <= 0) {
      throw InvalidArgument(fmt::format("{}: pool_size and strides must be positive", class_name()));
    }
    check_padding(padding_);
  }
  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override {
    const Dims& x = inputs[0];
    check_rank(x, 4, "(batch, height, width, channels)");
    Dims out = x;
    for (int i = 0; i < 2; ++i) {
      out[i + 1] = window_output(x[i + 1], pool_size_[i], strides_[i], padding_);
      if (out[i + 1] == 0) {
        throw InvalidArgument(fmt::format("pool {}x{} shrinks dimension {} ({}) of its input {} to 0", pool_size_[0],
                                          pool_size_[1], i + 1, i == 0 ? "height" : "width", format_dims(x)),
                              "use padding 'same', a smaller pool_size, or fewer pooling layers before it");
      }
    }
    return {out};
  }
  nlohmann::json get_config() const override {
    return {{"name", name()}, {"pool_size", pool_size_}, {"strides", strides_}, {"padding", padding_}};
  }
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool) override {
    const Pool2dOptions options{.pool_size = pool_size_, .strides = strides_, .padding = padding_};
    return {max_ ? max_pool2d(inputs[0], options) : avg_pool2d(inputs[0], options)};
  }

 private:
  bool max_;
  std::array<int64_t, 2> pool_size_, strides_;
  std::string padding_;
};

// Mean over the spatial axes: GlobalAveragePooling1D (N, T, C) -> (N, C), 2D (N, H, W, C) -> (N, C).
class GlobalAveragePoolingLayer : public LayerImpl {
 public:
  GlobalAveragePoolingLayer(int spatial_rank, const NamedOptions& options)
      : LayerImpl(fmt::format("GlobalAveragePooling{}D", spatial_rank),
                  name_or(options.name, spatial_rank == 1 ? "global_average_pooling1d" : "global_average_pooling2d")),
        spatial_rank_(spatial_rank) {}
  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override {
    check_rank(inputs[0], spatial_rank_ + 2,
               spatial_rank_ == 1 ? "(batch, steps, features)" : "(batch, height, width, channels)");
    return {{inputs[0][0], inputs[0].back()}};
  }
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool) override {
    return {spatial_rank_ == 1 ? mean(inputs[0], {1}) : mean(inputs[0], {1, 2})};
  }

 private:
  int spatial_rank_;
};

// ---- shape layers ----

int64_t known_numel(const Dims& dims, size_t from) {
  int64_t total = 1;
  for (size_t i = from; i < dims.size(); ++i) {
    if (dims[i] < 0) return -1;
    total *= dims[i];
  }
  return total;
}

class FlattenLayer : public LayerImpl {
 public:
  explicit FlattenLayer(const NamedOptions& options) : LayerImpl("Flatten", name_or(options.name, "flatten")) {}
  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override {
    if (inputs[0].empty()) throw InvalidArgument("expects an input with a batch dimension, got a scalar");
    return {{inputs[0][0], known_numel(inputs[0], 1)}};
  }
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool) override {
    const Tensor& x = inputs[0];
    return {reshape(x, std::vector<int64_t>{x.dim(0), x.numel() / std::max<int64_t>(1, x.dim(0))})};
  }
};

class ReshapeLayer : public LayerImpl {
 public:
  ReshapeLayer(Dims target, const NamedOptions& options)
      : LayerImpl("Reshape", name_or(options.name, "reshape")), target_(std::move(target)) {}
  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override {
    const int64_t numel = known_numel(inputs[0], 1);
    Dims out = {inputs[0].empty() ? -1 : inputs[0][0]};
    int64_t product = 1;
    int unknown = -1;
    for (size_t i = 0; i < target_.size(); ++i) {
      if (target_[i] == -1 && unknown < 0) {
        unknown = static_cast<int>(i);
      } else if (target_[i] <= 0) {
        throw InvalidArgument(fmt::format("target_shape {} may hold one -1 and positive sizes", format_dims(target_)));
      } else {
        product *= target_[i];
      }
      out.push_back(target_[i]);
    }
    if (numel >= 0) {
      if (unknown >= 0 && numel % product == 0) {
        out[static_cast<size_t>(unknown) + 1] = numel / product;
      } else if (unknown >= 0 || numel != product) {
        throw InvalidArgument(fmt::format("cannot reshape {} ({} values per sample) to target_shape {}",
                                          format_dims(inputs[0]), numel, format_dims(target_)));
      }
    }
    return {out};
  }
  nlohmann::json get_config() const override { return {{"name", name()}, {"target_shape", target_}}; }
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool) override {
    std::vector<int64_t> shape = {inputs[0].dim(0)};
    shape.insert(shape.end(), target_.begin(), target_.end());
    return {reshape(inputs[0], shape)};
  }

 private:
  Dims target_;
};

class ActivationLayer : public LayerImpl {
 public:
  ActivationLayer(std::string activation, const NamedOptions& options)
      : LayerImpl("Activation", name_or(options.name, "activation")), activation_(std::move(activation)) {
    check_activation(activation_);
  }
  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override { return inputs; }
  nlohmann::json get_config() const override { return {{"name", name()}, {"activation", activation_}}; }
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool) override {
    return {apply_activation(activation_, inputs[0])};
  }

 private:
  std::string activation_;
};

// ---- merging ----

class AddLayer : public LayerImpl {
 public:
  explicit AddLayer(const NamedOptions& options) : LayerImpl("Add", name_or(options.name, "add")) {}
  int num_inputs() const override { return -1; }
  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override {
    for (const Dims& dims : inputs) {
      if (dims != inputs[0]) {
        throw InvalidArgument(
            fmt::format("inputs must have one shape, got {} and {}", format_dims(inputs[0]), format_dims(dims)));
      }
    }
    return {inputs[0]};
  }
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool) override {
    Tensor total = inputs[0];
    for (size_t i = 1; i < inputs.size(); ++i) total = total + inputs[i];
    return {total};
  }
};

class ConcatenateLayer : public LayerImpl {
 public:
  explicit ConcatenateLayer(const ConcatenateOptions& options)
      : LayerImpl("Concatenate", name_or(options.name, "concatenate")), axis_(options.axis) {}
  int num_inputs() const override { return -1; }
  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override {
    const auto rank = static_cast<int64_t>(inputs[0].size());
    const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
    if (axis <= 0 || axis >= rank) {
      throw InvalidArgument(
          fmt::format("axis {} is out of range for inputs of rank {} (the batch axis 0 cannot join)", axis_, rank));
    }
    Dims out = inputs[0];
    for (size_t k = 1; k < inputs.size(); ++k) {
      const Dims& dims = inputs[k];
      bool match = static_cast<int64_t>(dims.size()) == rank;
      for (int64_t i = 0; match && i < rank; ++i) match = i == axis || dims[i] == out[i];
      if (!match) {
        throw InvalidArgument(
            fmt::format("inputs {} and {} differ outside axis {}", format_dims(inputs[0]), format_dims(dims), axis_));
      }
      out[axis] = out[axis] < 0 || dims[axis] < 0 ? -1 : out[axis] + dims[axis];
    }
    return {out};
  }
  nlohmann::json get_config() const override { return {{"name", name()}, {"axis", axis_}}; }
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool) override { return {concat(inputs, axis_)}; }

 private:
  int64_t axis_;
};

// ---- regularization and normalization ----

class DropoutLayer : public LayerImpl {
 public:
  DropoutLayer(double rate, const DropoutOptions& options)
      : LayerImpl("Dropout", name_or(options.name, "dropout")), rate_(rate) {
    if (!(rate >= 0 && rate < 1)) throw InvalidArgument(fmt::format("Dropout: rate must be in [0, 1), got {}", rate));
    if (options.seed) generator_ = std::make_unique<Generator>(*options.seed);
    seed_ = options.seed;
  }
  nlohmann::json get_config() const override {
    return {{"name", name()}, {"rate", rate_}, {"seed", seed_ ? nlohmann::json(*seed_) : nlohmann::json()}};
  }
  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override { return inputs; }
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool training) override {
    if (!training || rate_ == 0) return inputs;
    return {dropout(inputs[0], rate_, generator_.get())};
  }

 private:
  double rate_;
  std::optional<uint64_t> seed_;
  std::unique_ptr<Generator> generator_;
};

class BatchNormalizationLayer : public LayerImpl {
 public:
  explicit BatchNormalizationLayer(BatchNormalizationOptions options)
      : LayerImpl("BatchNormalization", name_or(options.name, "batch_normalization")), options_(std::move(options)) {}
  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override {
    const auto rank = static_cast<int64_t>(inputs[0].size());
    if (rank < 2) throw InvalidArgument(fmt::format("expects an input of rank >= 2, got {}", format_dims(inputs[0])));
    if (options_.axis != -1 && options_.axis != rank - 1) {
      throw Unimplemented(fmt::format("axis {}: only the last (channel) axis is supported", options_.axis),
                          "use axis -1 with channels-last data");
    }
    (void)known_last_dim(inputs[0], "the channels");
    return inputs;
  }
  nlohmann::json get_config() const override {
    return {{"name", name()},
            {"axis", options_.axis},
            {"momentum", options_.momentum},
            {"epsilon", options_.epsilon},
            {"center", options_.center},
            {"scale", options_.scale}};
  }
  void build(const std::vector<Dims>& inputs) override {
    const Shape channels{inputs[0].back()};
    gamma_ = add_weight("gamma", channels, "ones", options_.scale);
    beta_ = add_weight("beta", channels, "zeros", options_.center);
    moving_mean_ = add_weight("moving_mean", channels, "zeros", false);
    moving_variance_ = add_weight("moving_variance", channels, "ones", false);
  }
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool training) override {
    const Tensor& x = inputs[0];
    // The op normalizes over every axis but the last for ranks 2 and 4; other ranks go through rank 2.
    const bool direct = x.rank() == 2 || x.rank() == 4;
    const Tensor x_op = direct ? x : reshape(x, std::vector<int64_t>{-1, x.dim(-1)});
    const Tensor gamma = options_.scale ? gamma_.value() : stop_gradient(gamma_.value());
    const Tensor beta = options_.center ? beta_.value() : stop_gradient(beta_.value());
    Tensor y;
    if (training) {
      auto [out, batch_mean, batch_variance] = batch_norm_training(x_op, gamma, beta, options_.epsilon);
      const double m = options_.momentum;
      moving_mean_.assign(moving_mean_.value() * m + stop_gradient(batch_mean) * (1 - m));
      moving_variance_.assign(moving_variance_.value() * m + stop_gradient(batch_variance) * (1 - m));
      y = out;
    } else {
      y = batch_norm_inference(x_op, gamma, beta, moving_mean_.value(), moving_variance_.value(), options_.epsilon);
    }
    return {direct ? y : reshape(y, x.shape())};
  }

 private:
  BatchNormalizationOptions options_;
  Variable gamma_, beta_, moving_mean_, moving_variance_;
};

class LayerNormalizationLayer : public LayerImpl {
 public:
  explicit LayerNormalizationLayer(LayerNormalizationOptions options)
      : LayerImpl("LayerNormalization", name_or(options.name, "layer_normalization")), options_(std::move(options)) {}
  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override {
    const auto rank = static_cast<int64_t>(inputs[0].size());
    if (options_.axis != -1 && options_.axis != rank - 1) {
      throw Unimplemented(fmt::format("axis {}: only the last axis is supported", options_.axis));
    }
    (void)known_last_dim(inputs[0], "the normalized axis");
    return inputs;
  }
  nlohmann::json get_config() const override {
    return {{"name", name()}, {"axis", options_.axis}, {"epsilon", options_.epsilon}};
  }
  void build(const std::vector<Dims>& inputs) override {
    gamma_ = add_weight("gamma", Shape{inputs[0].back()}, "ones");
    beta_ = add_weight("beta", Shape{inputs[0].back()}, "zeros");
  }
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool) override {
    return {layer_norm(inputs[0], gamma_.value(), beta_.value(), options_.epsilon)};
  }

 private:
  LayerNormalizationOptions options_;
  Variable gamma_, beta_;
};

// ---- inputs, embeddings, preprocessing ----

class EmbeddingLayer : public LayerImpl {
 public:
  EmbeddingLayer(int64_t input_dim, int64_t output_dim, EmbeddingOptions options)
      : LayerImpl("Embedding", name_or(options.name, "embedding")),
        input_dim_(input_dim),
        output_dim_(output_dim),
        options_(std::move(options)) {
    if (input_dim <= 0 || output_dim <= 0) {
      throw InvalidArgument(
          fmt::format("Embedding: input_dim and output_dim must be positive, got {} and {}", input_dim, output_dim));
    }
  }
  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override {
    Dims out = inputs[0];
    out.push_back(output_dim_);
    return {out};
  }
  nlohmann::json get_config() const override {
    return {{"name", name()},
            {"input_dim", input_dim_},
            {"output_dim", output_dim_},
            {"embeddings_initializer", initializer_to_json(options_.embeddings_initializer)}};
  }
  void build(const std::vector<Dims>&) override {
    embeddings_ = add_weight("embeddings", Shape{input_dim_, output_dim_}, options_.embeddings_initializer);
  }
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool) override {
    Tensor ids = inputs[0];
    if (is_floating(ids.dtype())) ids = cast(ids, DType::kI64);
    return {gather(embeddings_.value(), ids, 0)};
  }

 private:
  int64_t input_dim_, output_dim_;
  EmbeddingOptions options_;
  Variable embeddings_;
};

class RescalingLayer : public LayerImpl {
 public:
  RescalingLayer(double scale, const RescalingOptions& options)
      : LayerImpl("Rescaling", name_or(options.name, "rescaling")), scale_(scale), offset_(options.offset) {}
  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override { return inputs; }
  nlohmann::json get_config() const override { return {{"name", name()}, {"scale", scale_}, {"offset", offset_}}; }
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool) override {
    Tensor x = inputs[0];
    if (!is_floating(x.dtype())) x = cast(x, floatx());
    Tensor y = x * scale_;
    return {offset_ == 0 ? y : y + offset_};
  }

 private:
  double scale_, offset_;
};

class InputLayerImpl : public LayerImpl {
 public:
  InputLayerImpl(Dims shape, DType dtype, const std::string& name)
      : LayerImpl("InputLayer", name_or(name, "input_layer")), shape_(std::move(shape)), dtype_(dtype) {}
  int num_inputs() const override { return 1; }
  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override { return inputs; }
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool) override { return inputs; }
  const Dims& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  nlohmann::json get_config() const override {
    nlohmann::json batch_shape = {nullptr};
    for (int64_t d : shape_) batch_shape.push_back(d < 0 ? nlohmann::json() : nlohmann::json(d));
    return {{"name", name()}, {"batch_input_shape", batch_shape}, {"dtype", keras_dtype_name(dtype_)}};
  }

 private:
  Dims shape_;
  DType dtype_;
};

}  // namespace

Layer Dense(int64_t units, const DenseOptions& options) { return make_layer<DenseLayer>(units, options); }
Layer Conv2D(int64_t filters, std::array<int64_t, 2> kernel_size, const Conv2DOptions& options) {
  return make_layer<Conv2DLayer>(filters, kernel_size, options);
}
Layer DepthwiseConv2D(std::array<int64_t, 2> kernel_size, const DepthwiseConv2DOptions& options) {
  return make_layer<DepthwiseConv2DLayer>(kernel_size, options);
}
Layer MaxPooling2D(std::array<int64_t, 2> pool_size, const Pooling2DOptions& options) {
  return make_layer<Pooling2DLayer>(true, pool_size, options);
}
Layer AveragePooling2D(std::array<int64_t, 2> pool_size, const Pooling2DOptions& options) {
  return make_layer<Pooling2DLayer>(false, pool_size, options);
}
Layer GlobalAveragePooling2D(const NamedOptions& options) { return make_layer<GlobalAveragePoolingLayer>(2, options); }
Layer GlobalAveragePooling1D(const NamedOptions& options) { return make_layer<GlobalAveragePoolingLayer>(1, options); }
Layer Flatten(const NamedOptions& options) { return make_layer<FlattenLayer>(options); }
Layer Reshape(const Dims& target_shape, const NamedOptions& options) {
  return make_layer<ReshapeLayer>(target_shape, options);
}
Layer Activation(const std::string& activation, const NamedOptions& options) {
  return make_layer<ActivationLayer>(activation, options);
}
Layer Add(const NamedOptions& options) { return make_layer<AddLayer>(options); }
Layer Concatenate(const ConcatenateOptions& options) { return make_layer<ConcatenateLayer>(options); }
Layer Dropout(double rate, const DropoutOptions& options) { return make_layer<DropoutLayer>(rate, options); }
Layer BatchNormalization(const BatchNormalizationOptions& options) {
  return make_layer<BatchNormalizationLayer>(options);
}
Layer LayerNormalization(const LayerNormalizationOptions& options) {
  return make_layer<LayerNormalizationLayer>(options);
}
Layer Embedding(int64_t input_dim, int64_t output_dim, const EmbeddingOptions& options) {
  return make_layer<EmbeddingLayer>(input_dim, output_dim, options);
}
Layer Rescaling(double scale, const RescalingOptions& options) { return make_layer<RescalingLayer>(scale, options); }
Layer InputLayer(const Dims& shape, DType dtype, const std::string& name) {
  return make_layer<InputLayerImpl>(shape, dtype, name);
}

// Sequential needs an InputLayer's declared shape and dtype.
std::optional<std::pair<Dims, DType>> input_layer_spec(const LayerImpl& layer) {
  if (const auto* input = dynamic_cast<const InputLayerImpl*>(&layer)) return std::pair{input->shape(), input->dtype()};
  return std::nullopt;
}

}  // namespace nimbus::nn
