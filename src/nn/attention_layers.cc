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
#include "nimbus/ops/shape_ops.h"
#include "src/nn/internal/decoding_cache.h"
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
    const Tensor q = project(query, query_kernel_, query_bias_);
    Tensor k = project(key, key_kernel_, key_bias_);
    Tensor v = project(value, value_kernel_, value_bias_);
    int64_t offset = 0;  // the queries' position in the sequence
    if (DecodingCache* cache = active_decoding_cache()) offset = extend_cache(*cache, inputs.size(), k, v);
    // One fused op (ops/nn.h): no (N, heads, T, S) scores or probabilities are kept.
    AttentionOptions attention{.scale = 1.0 / std::sqrt(static_cast<double>(key_dim_))};
    if (inputs.size() == 4 || offset > 0) {
      // A masked position gets -1e9 added to its score, as in Keras; an attention_mask and the causal mask
      // combine into one, so a row that allows no key still spreads over every key as Keras's does.
      attention.mask = (1.0 - allowed_positions(inputs, q.dim(2), k.dim(2), offset, q)) * kMaskedScore;
    } else {
      attention.causal = options_.use_causal_mask;  // the op's causal mask: queries and keys start together
    }
    if (training) {
      attention.dropout = options_.dropout;
      attention.generator = generator_.get();
    }
    const Tensor heads =
        transpose(scaled_dot_product_attention(q, k, v, attention), {0, 2, 1, 3});  // (N, T, heads, Dv)
    const int64_t n = query.dim(0), t = query.dim(1);
    const Shape& w = output_kernel_.shape();
    Tensor output = matmul(reshape(heads, std::vector<int64_t>{n * t, w[0] * w[1]}),
                           reshape(output_kernel_.value(), Shape{w[0] * w[1], w[2]}));
    if (options_.use_bias) output = output + output_bias_.value();
    return {reshape(output, Shape{n, t, w[2]})};
  }

 private:
  // Incremental decoding: appends this call's keys and values (N, heads, T, dim) to the cache's and
  // replaces k and v by all of them, so the new queries attend over the whole sequence; returns
  // the new tokens' offset.
  int64_t extend_cache(DecodingCache& cache, size_t num_inputs, Tensor& k, Tensor& v) {
    if (!options_.use_causal_mask || num_inputs == 4) {
      throw InvalidArgument(
          fmt::format("MultiHeadAttention '{}': decoding with a KV cache needs causal self-attention without an "
                      "attention_mask",
                      name()),
          "build the model's attention with use_causal_mask: true, or generate without the cache");
    }
    DecodingCache::Entry& entry = cache.entry(this);
    if (entry.keys.defined()) {
      NIMBUS_ASSERT(entry.keys.dim(2) == cache.offset())
          << name() << ": the KV cache holds " << entry.keys.dim(2) << " positions at offset " << cache.offset();
      k = concat({entry.keys, k}, 2);
      v = concat({entry.values, v}, 2);
    }
    entry.keys = k;
    entry.values = v;
    return cache.offset();
  }

  // 1 where query t may attend to key s, broadcastable to the scores (N, heads, T, S): the
  // attention_mask input (N, 1, T, S) and/or the causal mask (T, S), of which there is at least one.
  // Queries from `offset` on (decoding with a cache) see positions s <= offset + t.
  Tensor allowed_positions(const std::vector<Tensor>& inputs, int64_t t, int64_t s, int64_t offset,
                           const Tensor& like) const {
    std::optional<Tensor> allowed;
    if (inputs.size() == 4) allowed = cast(expand_dims(inputs[3], 1), like.dtype());
    if (options_.use_causal_mask) {
      // Keras's _compute_causal_mask: tril(ones(T, S)), built from the lengths alone.
      const Tensor causal = tril(ones(Shape{t, s}, like.dtype(), like.device()), offset);
      allowed = allowed ? *allowed * causal : causal;
    }
    return *allowed;
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
    // Decoding with a cache, x holds the tokens from the cache's offset on.
    const DecodingCache* cache = active_decoding_cache();
    const int64_t offset = cache != nullptr ? cache->offset() : 0;
    if (offset + x.dim(1) > sequence_length_) {
      throw InvalidArgument(fmt::format("PositionEmbedding '{}': positions {} to {} are past sequence_length {}",
                                        name(), offset, offset + x.dim(1) - 1, sequence_length_),
                            "keep prompts and generated text within the model's context");
    }
    Tensor table = embeddings_.value();
    if (offset > 0 || x.dim(1) < sequence_length_) table = slice(table, {offset, 0}, {x.dim(1), table.dim(1)});
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
