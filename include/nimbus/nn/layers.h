// The built-in layers, with Keras's names, arguments and defaults. Each
// function returns a new layer; options are designated initializers.
//
//   nn::Dense(128, {.activation = "relu", .kernel_regularizer = nn::L2(1e-4)});
//   nn::Conv2D(32, {3, 3}, {.padding = "same", .activation = "relu"});
//   nn::MaxPooling2D({2, 2});
//   nn::Dropout(0.25);
//   nn::BatchNormalization();
//   nn::MultiHeadAttention(4, 16)({x, x});          // self-attention
//
// Images are NHWC (channels last, Keras's default). Activations by Keras's
// name (nimbus/ops/activation_table.h): linear, relu, sigmoid, tanh, softmax,
// log_softmax, gelu, softplus, silu (swish).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nimbus/nn/layer.h"

namespace nimbus::nn {

// y = activation(x w + b), on the last axis of x.
struct DenseOptions {
  std::string activation = "linear";
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer kernel_regularizer{};
  std::string name{};
};
Layer Dense(int64_t units, const DenseOptions& options = {});

// 2-D convolution over NHWC input with a (KH, KW, C, filters) kernel.
struct Conv2DOptions {
  std::array<int64_t, 2> strides{1, 1};
  std::string padding = "valid";  // or "same"
  std::array<int64_t, 2> dilation_rate{1, 1};
  std::string activation = "linear";
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer kernel_regularizer{};
  std::string name{};
};
Layer Conv2D(int64_t filters, std::array<int64_t, 2> kernel_size, const Conv2DOptions& options = {});

// Depthwise 2-D convolution: each input channel is convolved with its own
// depth_multiplier filters; kernel "depthwise_kernel" (KH, KW, C, depth_multiplier),
// output channel c * depth_multiplier + m (Keras's order).
struct DepthwiseConv2DOptions {
  std::array<int64_t, 2> strides{1, 1};
  std::string padding = "valid";  // or "same"
  int64_t depth_multiplier = 1;
  std::array<int64_t, 2> dilation_rate{1, 1};
  std::string activation = "linear";
  bool use_bias = true;
  Initializer depthwise_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer depthwise_regularizer{};
  std::string name{};
};
Layer DepthwiseConv2D(std::array<int64_t, 2> kernel_size, const DepthwiseConv2DOptions& options = {});

struct Pooling2DOptions {
  std::optional<std::array<int64_t, 2>> strides{};  // default: pool_size
  std::string padding = "valid";
  std::string name{};
};
Layer MaxPooling2D(std::array<int64_t, 2> pool_size = {2, 2}, const Pooling2DOptions& options = {});
Layer AveragePooling2D(std::array<int64_t, 2> pool_size = {2, 2}, const Pooling2DOptions& options = {});

struct NamedOptions {
  std::string name{};
};
// Mean over the spatial axes: (N, H, W, C) -> (N, C).
Layer GlobalAveragePooling2D(const NamedOptions& options = {});
// Mean over the sequence axis: (N, T, C) -> (N, C).
Layer GlobalAveragePooling1D(const NamedOptions& options = {});
// (N, ...) -> (N, product of the rest).
Layer Flatten(const NamedOptions& options = {});
// (N, ...) -> (N, target_shape...); one entry of target_shape may be -1.
Layer Reshape(const Dims& target_shape, const NamedOptions& options = {});
Layer Activation(const std::string& activation, const NamedOptions& options = {});
// Elementwise sum of two or more inputs of one shape.
Layer Add(const NamedOptions& options = {});

struct ConcatenateOptions {
  int64_t axis = -1;
  std::string name{};
};
Layer Concatenate(const ConcatenateOptions& options = {});

struct DropoutOptions {
  std::optional<uint64_t> seed{};  // default: draws from the default generator
  std::string name{};
};
// Training only: zeroes inputs with probability `rate`, scales the rest by 1 / (1 - rate).
Layer Dropout(double rate, const DropoutOptions& options = {});

struct BatchNormalizationOptions {
  int64_t axis = -1;  // the channel axis; only the last axis is supported
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  std::string name{};
};
// Training: normalizes with the batch's statistics and updates the moving ones
// (moving = moving * momentum + batch * (1 - momentum), biased variance as in
// Keras); inference: normalizes with the moving statistics.
Layer BatchNormalization(const BatchNormalizationOptions& options = {});

struct LayerNormalizationOptions {
  int64_t axis = -1;  // only the last axis is supported
  double epsilon = 1e-3;
  std::string name{};
};
Layer LayerNormalization(const LayerNormalizationOptions& options = {});

struct EmbeddingOptions {
  Initializer embeddings_initializer{"uniform"};
  std::string name{};
};
// Integer ids (N, ...) -> (N, ..., output_dim); the table starts uniform in [-0.05, 0.05].
Layer Embedding(int64_t input_dim, int64_t output_dim, const EmbeddingOptions& options = {});

struct PositionEmbeddingOptions {
  Initializer initializer = "glorot_uniform";
  std::string name{};
};
// KerasHub's PositionEmbedding: a learned (sequence_length, features) table whose first T
// rows, broadcast to the input's shape (N, T, features), are the output; add it to the input
// with Add(). T may be shorter than sequence_length.
Layer PositionEmbedding(int64_t sequence_length, const PositionEmbeddingOptions& options = {});

// Keras's MultiHeadAttention over (batch, sequence, features) inputs. Inputs, in order:
// query (N, T, Dq), value (N, S, Dv), optionally key (N, S, Dk; default: value) and
// attention_mask (N, T, S; nonzero where query t may attend to position s).
//
//   q_h = query W_q[h] + b_q[h], k_h, v_h alike; P_h = softmax(q_h k_h^T / sqrt(key_dim) + mask bias);
//   output = sum_h dropout(P_h) v_h W_o[h] + b_o, (N, T, output_shape)
//
// Weights as Keras names and shapes them: query/kernel (Dq, heads, key_dim), query/bias
// (heads, key_dim), key/..., value/kernel (Dv, heads, value_dim), attention_output/kernel
// (heads, value_dim, output_shape), attention_output/bias (output_shape). A masked position
// gets -1e9 added to its score, as in Keras.
//
// use_causal_mask: query t attends only to positions s <= t (Keras's lower-triangular mask
// of ones(T, S), combined with attention_mask when both are given); what a decoder-only
// language model needs. Keras passes it at call time; here it is a layer option (in a
// config's layer list: `use_causal_mask: true`).
struct MultiHeadAttentionOptions {
  std::optional<int64_t> value_dim{};  // default: key_dim
  bool use_causal_mask = false;
  double dropout = 0;  // on the attention probabilities, in training
  bool use_bias = true;
  std::optional<int64_t> output_shape{};  // default: the query's features
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  std::optional<uint64_t> seed{};  // the dropout's seed
  std::string name{};
};
Layer MultiHeadAttention(int64_t num_heads, int64_t key_dim, const MultiHeadAttentionOptions& options = {});

// Keras's Normalization: (x - mean) / max(sqrt(variance), 1e-7), with one mean and variance
// per index of `axis` (the others are reduced over; an empty axis list: one scalar mean and
// variance). Either give mean and variance (a scalar, or one value per index) or call
// adapt(layer, data), which computes them from data (N, ...) and keeps them as the
// non-trainable weights "mean" and "variance". invert maps normalized values back.
struct NormalizationOptions {
  std::vector<int64_t> axis{-1};
  std::optional<std::vector<double>> mean{};
  std::optional<std::vector<double>> variance{};
  bool invert = false;
  std::string name{};
};
Layer Normalization(const NormalizationOptions& options = {});
// Keras's layer.adapt(data) for a Normalization layer: builds it for data's sample shape if it
// is not built yet and sets mean and (biased) variance from data.
void adapt(const Layer& normalization, const Tensor& data);

struct RescalingOptions {
  double offset = 0;
  std::string name{};
};
// x * scale + offset (integer inputs, such as u8 pixels, are cast to floatx() first).
Layer Rescaling(double scale, const RescalingOptions& options = {});

// The layer behind Input(): Sequential models can start with it.
Layer InputLayer(const Dims& shape, DType dtype = DType::kF32, const std::string& name = "");

// A layer from its class name and Keras config (LayerImpl::get_config's form; Keras's own
// to_json() layer entries are read too, their unknown keys ignored).
Layer layer_from_config(const std::string& class_name, const nlohmann::json& config);
// "float32", "int64", ... (Keras's dtype names) to a DType; Nimbus's own names work too.
DType dtype_from_keras_name(const std::string& name);

// The named activation applied to x (InvalidArgument for an unknown name).
Tensor apply_activation(const std::string& activation, const Tensor& x);

}  // namespace nimbus::nn
