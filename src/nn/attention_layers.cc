// Sequence layers for transformers: MultiHeadAttention (Keras) and
// PositionEmbedding (KerasHub).
#include <fmt/format.h>

#include <cmath>

#include "nimbus/base/error.h"
#include "nimbus/base/rng.h"
#include "nimbus/nn/layers.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/shape_ops.h"
#include "src/nn/internal/layer_support.h"

namespace nimbus::nn {

using namespace internal;

namespace {

// Keras's _large_negative_number for f32: added to the scores of masked positions.
constexpr double kMaskedScore = -1e9;

class MultiHeadAttentionLayer : public LayerImpl {
 public:
  MultiHeadAttentionLayer(int64_t num_heads, int64_t key_dim, MultiHeadAttentionOptions options)
      : LayerImpl("MultiHeadAttention", name_or(options.name, "multi_head_attention")),
        num_heads_(num_heads),
        key_dim_(key_dim),
        value_dim_(options.value_dim.value_or(key_dim)),
        options_(std::move(options)) {
    if (num_heads <= 0 || key_dim <= 0 || value_dim_ <= 0) {
      throw InvalidArgument(
          fmt::format("MultiHeadAttention: num_heads, key_dim and value_dim must be positive, got "
                      "{}, {} and {}",
                      num_heads, key_dim, value_dim_));
    }
    if (!(options_.dropout >= 0 && options_.dropout < 1)) {
      throw InvalidArgument(fmt::format("MultiHeadAttention: dropout must be in [0, 1), got {}", options_.dropout));
    }
    if (options_.output_shape && *options_.output_shape <= 0) {
      throw InvalidArgument(
          fmt::format("MultiHeadAttention: output_shape must be positive, got {}", *options_.output_shape));
    }
    if (options_.seed) generator_ = std::make_unique<Generator>(*options_.seed);
  }

  // query, value, key, attention_mask; the last two are optional.
  int num_inputs() const override { return -1; }
  std::vector<std::string> input_names() const override { return {"query", "value", "key", "attention_mask"}; }

  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override {
    if (inputs.size() > 4) {
      throw InvalidArgument(
          fmt::format("takes query, value and optionally key and attention_mask, got {} inputs", inputs.size()));
    }
    const char* roles[] = {"query", "value", "key"};
    for (size_t i = 0; i < std::min<size_t>(inputs.size(), 3); ++i) {
      check_rank(inputs[i], 3, fmt::format("(batch, sequence, features) as its {}", roles[i]).c_str(),
                 "attention runs over axis 1; reshape images to (batch, rows, features) first");
      (void)known_last_dim(inputs[i], roles[i]);
    }
    const Dims& query = inputs[0];
    const Dims& value = inputs[1];
    const Dims& key = inputs.size() > 2 ? inputs[2] : value;
    if (key[1] >= 0 && value[1] >= 0 && key[1] != value[1]) {
      throw InvalidArgument(
          fmt::format("key {} and value {} must have one sequence length", format_dims(key), format_dims(value)));
    }
    if (inputs.size() == 4) {
      const Dims& mask = inputs[3];
      const Dims expected = {query[0], query[1], key[1]};
      bool match = mask.size() == 3;
      for (size_t i = 1; match && i < 3; ++i) match = mask[i] < 0 || expected[i] < 0 || mask[i] == expected[i];
      if (!match) {
        throw InvalidArgument(fmt::format("attention_mask {} must be (batch, query length, key length) = {}",
                                          format_dims(mask), format_dims(expected)));
      }
    }
    if (built()) {
      const Dims built_features = {query_kernel_.shape()[0], value_kernel_.shape()[0], key_kernel_.shape()[0]};
      const Dims features = {query[2], value[2], key[2]};
      if (features != built_features) {
        throw InvalidArgument(fmt::format("was built for (query, value, key) features {}, got {}",
                                          format_dims(built_features), format_dims(features)),
                              "a shared layer needs inputs of one feature size");
      }
    }
    return {{query[0], query[1], options_.output_shape.value_or(query[2])}};
  }

  void build(const std::vector<Dims>& inputs) override {
    const int64_t query_features = inputs[0][2], value_features = inputs[1][2];
    const int64_t key_features = inputs.size() > 2 ? inputs[2][2] : value_features;
    const int64_t output_features = options_.output_shape.value_or(query_features);
    const Initializer& kernel = options_.kernel_initializer;
    const Initializer& bias = options_.bias_initializer;
    // Keras's order: query, key, value, attention_output.
    query_kernel_ = add_weight("query/kernel", Shape{query_features, num_heads_, key_dim_}, kernel);
    if (options_.use_bias) query_bias_ = add_weight("query/bias", Shape{num_heads_, key_dim_}, bias);
    key_kernel_ = add_weight("key/kernel", Shape{key_features, num_heads_, key_dim_}, kernel);
    if (options_.use_bias) key_bias_ = add_weight("key/bias", Shape{num_heads_, key_dim_}, bias);
    value_kernel_ = add_weight("value/kernel", Shape{value_features, num_heads_, value_dim_}, kernel);
    if (options_.use_bias) value_bias_ = add_weight("value/bias", Shape{num_heads_, value_dim_}, bias);
    output_kernel_ = add_weight("attention_output/kernel", Shape{num_heads_, value_dim_, output_features}, kernel);
    if (options_.use_bias) output_bias_ = add_weight("attention_output/bias", Shape{output_features}, bias);
  }

  nlohmann::json get_config() const override {
    nlohmann::json config = {
        {"name", name()},
        {"num_heads", num_heads_},
        {"key_dim", key_dim_},
        {"value_dim", value_dim_},
        {"dropout", options_.dropout},
        {"use_bias", options_.use_bias},
        {"output_shape", options_.output_shape ? nlohmann::json(*options_.output_shape) : nlohmann::json()},
        {"kernel_initializer", initializer_to_json(options_.kernel_initializer)},
        {"bias_initializer", initializer_to_json(options_.bias_initializer)},
        {"seed", options_.seed ? nlohmann::json(*options_.seed) : nlohmann::json()}};
    // Keras takes use_causal_mask at call time, not in the config: written only when set, so
    // configs of other attention layers stay loadable by Keras.
    if (options_.use_causal_mask) config["use_causal_mask"] = true;
    return config;
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool training) override {
    const Tensor& query = inputs[0];
    const Tensor& value = inputs[1];
    const Tensor& key = inputs.size() > 2 ? inputs[2] : value;
    // Each projection: (N, T, D) x (D, heads, dim) -> (N, heads, T, dim).
    const Tensor q = project(query, query_kernel_, query_bias_) * (1.0 / std::sqrt(static_cast<double>(key_dim_)));
    const Tensor k = project(key, key_kernel_, key_bias_);
    const Tensor v = project(value, value_kernel_, value_bias_);
    Tensor scores = matmul(q, k, false, true);  // (N, heads, T, S)
    if (const std::optional<Tensor> allowed = allowed_positions(inputs, scores)) {
      scores = scores + (1.0 - *allowed) * kMaskedScore;
    }
    Tensor probabilities = softmax(scores, -1);
    if (training && options_.dropout > 0) probabilities = dropout(probabilities, options_.dropout, generator_.get());
    const Tensor heads = transpose(matmul(probabilities, v), {0, 2, 1, 3});  // (N, T, heads, value_dim)
    const int64_t n = query.dim(0), t = query.dim(1);
    const Shape& w = output_kernel_.shape();
    Tensor output = matmul(reshape(heads, std::vector<int64_t>{n * t, w[0] * w[1]}),
                           reshape(output_kernel_.value(), Shape{w[0] * w[1], w[2]}));
    if (options_.use_bias) output = output + output_bias_.value();
    return {reshape(output, Shape{n, t, w[2]})};
  }

 private:
  // 1 where query t may attend to position s, broadcastable to the scores (N, heads, T, S): the
  // attention_mask input (N, 1, T, S) and/or the causal mask (T, S); none when every position counts.
  std::optional<Tensor> allowed_positions(const std::vector<Tensor>& inputs, const Tensor& scores) const {
    std::optional<Tensor> allowed;
    if (inputs.size() == 4) allowed = cast(expand_dims(inputs[3], 1), scores.dtype());
    if (options_.use_causal_mask) {
      // Keras's _compute_causal_mask: tril(ones(T, S)), built from the lengths alone.
      const int64_t t = scores.dim(2), s = scores.dim(3);
      const Tensor causal = tril(ones(Shape{t, s}, scores.dtype(), scores.device()));
      allowed = allowed ? *allowed * causal : causal;
    }
    return allowed;
  }

  Tensor project(const Tensor& x, const Variable& kernel, const Variable& bias) const {
    const Shape& w = kernel.shape();  // (D, heads, dim)
    const int64_t n = x.dim(0), t = x.dim(1);
    Tensor y = matmul(reshape(x, std::vector<int64_t>{n * t, w[0]}), reshape(kernel.value(), Shape{w[0], w[1] * w[2]}));
    if (options_.use_bias) y = y + reshape(bias.value(), Shape{w[1] * w[2]});
    return transpose(reshape(y, Shape{n, t, w[1], w[2]}), {0, 2, 1, 3});
  }

  int64_t num_heads_, key_dim_, value_dim_;
  MultiHeadAttentionOptions options_;
  std::unique_ptr<Generator> generator_;
  Variable query_kernel_, query_bias_, key_kernel_, key_bias_, value_kernel_, value_bias_, output_kernel_, output_bias_;
};

class PositionEmbeddingLayer : public LayerImpl {
 public:
  PositionEmbeddingLayer(int64_t sequence_length, PositionEmbeddingOptions options)
      : LayerImpl("PositionEmbedding", name_or(options.name, "position_embedding")),
        sequence_length_(sequence_length),
        options_(std::move(options)) {
    if (sequence_length <= 0) {
      throw InvalidArgument(
          fmt::format("PositionEmbedding: sequence_length must be positive, got {}", sequence_length));
    }
  }
  std::vector<Dims> compute_output_shapes(const std::vector<Dims>& inputs) const override {
    const Dims& x = inputs[0];
    check_rank(x, 3, "(batch, sequence, features)");
    (void)known_last_dim(x, "the embedding size");
    if (x[1] > sequence_length_) {
      throw InvalidArgument(
          fmt::format("its input {} is longer than sequence_length {}", format_dims(x), sequence_length_),
          fmt::format("set sequence_length to at least {}", x[1]));
    }
    return {x};
  }
  void build(const std::vector<Dims>& inputs) override {
    embeddings_ = add_weight("embeddings", Shape{sequence_length_, inputs[0][2]}, options_.initializer);
  }
  nlohmann::json get_config() const override {
    return {{"name", name()},
            {"sequence_length", sequence_length_},
            {"initializer", initializer_to_json(options_.initializer)}};
  }
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool) override {
    const Tensor& x = inputs[0];
    Tensor table = embeddings_.value();
    if (x.dim(1) < sequence_length_) table = slice(table, {0, 0}, {x.dim(1), table.dim(1)});
    return {broadcast_to(table, x.shape())};
  }

 private:
  int64_t sequence_length_;
  PositionEmbeddingOptions options_;
  Variable embeddings_;
};

}  // namespace

Layer MultiHeadAttention(int64_t num_heads, int64_t key_dim, const MultiHeadAttentionOptions& options) {
  return make_layer<MultiHeadAttentionLayer>(num_heads, key_dim, options);
}

Layer PositionEmbedding(int64_t sequence_length, const PositionEmbeddingOptions& options) {
  return make_layer<PositionEmbeddingLayer>(sequence_length, options);
}

}  // namespace nimbus::nn
