// Keras's JSON forms: a layer from its class name and config
// (layer_from_config, what model configs and saved models are read with), and
// the forms of the initializers, regularizers and dtypes inside configs.
#include <fmt/format.h>

#include <functional>
#include <optional>

#include "nimbus/base/error.h"
#include "nimbus/nn/layers.h"
#include "src/nn/internal/layer_support.h"

namespace nimbus::nn {
namespace internal {

const std::pair<const char*, const char*> kInitializerClasses[] = {{"GlorotUniform", "glorot_uniform"},
                                                                   {"GlorotNormal", "glorot_normal"},
                                                                   {"HeNormal", "he_normal"},
                                                                   {"HeUniform", "he_uniform"},
                                                                   {"RandomUniform", "uniform"},
                                                                   {"Zeros", "zeros"},
                                                                   {"Ones", "ones"}};

// A plain name, or {"class_name": "HeNormal", "config": {"seed": 42}} when seeded (Keras's object form).
nlohmann::json initializer_to_json(const Initializer& initializer) {
  if (!initializer.seed) return initializer.name;
  for (const auto& [keras, name] : kInitializerClasses) {
    if (initializer.name == name) return {{"class_name", keras}, {"config", {{"seed", *initializer.seed}}}};
  }
  return {{"class_name", initializer.name}, {"config", {{"seed", *initializer.seed}}}};
}

Initializer initializer_from_json(const nlohmann::json& json) {
  if (json.is_string()) return Initializer(json.get<std::string>());
  std::string name = json.at("class_name").get<std::string>();
  for (const auto& [keras, snake] : kInitializerClasses) {
    if (name == keras) name = snake;
  }
  std::optional<uint64_t> seed;
  if (json.contains("config") && json["config"].contains("seed") && !json["config"]["seed"].is_null()) {
    seed = json["config"]["seed"].get<uint64_t>();
  }
  return Initializer(name, seed);
}

nlohmann::json regularizer_to_json(const Regularizer& regularizer) {
  if (!regularizer.active()) return nullptr;
  if (regularizer.l1 == 0) return {{"class_name", "L2"}, {"config", {{"l2", regularizer.l2}}}};
  if (regularizer.l2 == 0) return {{"class_name", "L1"}, {"config", {{"l1", regularizer.l1}}}};
  return {{"class_name", "L1L2"}, {"config", {{"l1", regularizer.l1}, {"l2", regularizer.l2}}}};
}

Regularizer regularizer_from_json(const nlohmann::json& json) {
  if (json.is_null()) return {};
  const nlohmann::json& config = json.at("config");
  return {.l1 = config.value("l1", 0.0), .l2 = config.value("l2", 0.0)};
}

const std::pair<DType, const char*> kKerasDTypes[] = {
    {DType::kF32, "float32"}, {DType::kF64, "float64"}, {DType::kF16, "float16"}, {DType::kBF16, "bfloat16"},
    {DType::kI32, "int32"},   {DType::kI64, "int64"},   {DType::kU8, "uint8"},    {DType::kBool, "bool"}};

const char* keras_dtype_name(DType dtype) {
  for (const auto& [d, name] : kKerasDTypes) {
    if (d == dtype) return name;
  }
  return "float32";
}

std::array<int64_t, 2> pair_of(const nlohmann::json& value) {
  if (value.is_number()) return {value.get<int64_t>(), value.get<int64_t>()};
  const auto v = value.get<std::vector<int64_t>>();
  if (v.size() != 2) throw InvalidArgument(fmt::format("expected two sizes, got {}", value.dump()));
  return {v[0], v[1]};
}

}  // namespace internal

using namespace internal;

DType dtype_from_keras_name(const std::string& name) {
  for (const auto& [d, keras] : kKerasDTypes) {
    if (name == keras) return d;
  }
  return parse_dtype(name);  // Nimbus's own names (f32, ...)
}

namespace {

// Keras arguments Nimbus reads but supports only at their defaults: anything else is refused, not ignored.
void check_supported_keras_arguments(const std::string& class_name, const nlohmann::json& c) {
  if (value_or<std::string>(c, "data_format", "channels_last") != "channels_last") {
    throw Unimplemented(
        fmt::format("{}: data_format {}: Nimbus's layers are channels_last", class_name, c["data_format"].dump()),
        "transpose the data to NHWC and use channels_last");
  }
  if (value_or<int64_t>(c, "groups", 1) != 1) {
    throw Unimplemented(fmt::format("{}: groups {} (grouped convolution layers)", class_name, c["groups"].dump()),
                        "DepthwiseConv2D covers one group per channel");
  }
}

Layer make_from_config(const std::string& class_name, const nlohmann::json& c) {
  check_supported_keras_arguments(class_name, c);
  const std::string name = value_or<std::string>(c, "name", "");
  const NamedOptions named{.name = name};
  if (class_name == "Dense") {
    DenseOptions o;
    o.activation = value_or<std::string>(c, "activation", "linear");
    o.use_bias = value_or(c, "use_bias", true);
    if (c.contains("kernel_initializer")) o.kernel_initializer = initializer_from_json(c["kernel_initializer"]);
    if (c.contains("bias_initializer")) o.bias_initializer = initializer_from_json(c["bias_initializer"]);
    if (c.contains("kernel_regularizer")) o.kernel_regularizer = regularizer_from_json(c["kernel_regularizer"]);
    o.name = name;
    return Dense(required<int64_t>(c, "units"), o);
  }
  if (class_name == "Conv2D") {
    Conv2DOptions o;
    if (c.contains("strides")) o.strides = pair_of(c["strides"]);
    o.padding = value_or<std::string>(c, "padding", "valid");
    if (c.contains("dilation_rate")) o.dilation_rate = pair_of(c["dilation_rate"]);
    o.activation = value_or<std::string>(c, "activation", "linear");
    o.use_bias = value_or(c, "use_bias", true);
    if (c.contains("kernel_initializer")) o.kernel_initializer = initializer_from_json(c["kernel_initializer"]);
    if (c.contains("bias_initializer")) o.bias_initializer = initializer_from_json(c["bias_initializer"]);
    if (c.contains("kernel_regularizer")) o.kernel_regularizer = regularizer_from_json(c["kernel_regularizer"]);
    o.name = name;
    return Conv2D(required<int64_t>(c, "filters"), pair_of(required<nlohmann::json>(c, "kernel_size")), o);
  }
  if (class_name == "DepthwiseConv2D") {
    DepthwiseConv2DOptions o;
    if (c.contains("strides")) o.strides = pair_of(c["strides"]);
    o.padding = value_or<std::string>(c, "padding", "valid");
    o.depth_multiplier = value_or<int64_t>(c, "depth_multiplier", 1);
    if (c.contains("dilation_rate")) o.dilation_rate = pair_of(c["dilation_rate"]);
    o.activation = value_or<std::string>(c, "activation", "linear");
    o.use_bias = value_or(c, "use_bias", true);
    if (c.contains("depthwise_initializer")) {
      o.depthwise_initializer = initializer_from_json(c["depthwise_initializer"]);
    }
    if (c.contains("bias_initializer")) o.bias_initializer = initializer_from_json(c["bias_initializer"]);
    if (c.contains("depthwise_regularizer")) {
      o.depthwise_regularizer = regularizer_from_json(c["depthwise_regularizer"]);
    }
    o.name = name;
    return DepthwiseConv2D(pair_of(required<nlohmann::json>(c, "kernel_size")), o);
  }
  if (class_name == "MaxPooling2D" || class_name == "AveragePooling2D") {
    Pooling2DOptions o;
    if (c.contains("strides") && !c["strides"].is_null()) o.strides = pair_of(c["strides"]);
    o.padding = value_or<std::string>(c, "padding", "valid");
    o.name = name;
    const auto pool = c.contains("pool_size") ? pair_of(c["pool_size"]) : std::array<int64_t, 2>{2, 2};
    return class_name == "MaxPooling2D" ? MaxPooling2D(pool, o) : AveragePooling2D(pool, o);
  }
  if (class_name == "GlobalAveragePooling2D") return GlobalAveragePooling2D(named);
  if (class_name == "GlobalAveragePooling1D") return GlobalAveragePooling1D(named);
  if (class_name == "Flatten") return Flatten(named);
  if (class_name == "Reshape") return Reshape(required<Dims>(c, "target_shape"), named);
  if (class_name == "Activation") return Activation(required<std::string>(c, "activation"), named);
  if (class_name == "Add") return Add(named);
  if (class_name == "Concatenate") return Concatenate({.axis = value_or<int64_t>(c, "axis", -1), .name = name});
  if (class_name == "Dropout") {
    DropoutOptions o;
    if (c.contains("seed") && !c["seed"].is_null()) o.seed = c["seed"].get<uint64_t>();
    o.name = name;
    return Dropout(required<double>(c, "rate"), o);
  }
  if (class_name == "BatchNormalization") {
    BatchNormalizationOptions o;
    o.axis =
        c.contains("axis") && c["axis"].is_array() ? c["axis"][0].get<int64_t>() : value_or<int64_t>(c, "axis", -1);
    o.momentum = value_or(c, "momentum", 0.99);
    o.epsilon = value_or(c, "epsilon", 1e-3);
    o.center = value_or(c, "center", true);
    o.scale = value_or(c, "scale", true);
    o.name = name;
    return BatchNormalization(o);
  }
  if (class_name == "LayerNormalization") {
    LayerNormalizationOptions o;
    o.axis =
        c.contains("axis") && c["axis"].is_array() ? c["axis"][0].get<int64_t>() : value_or<int64_t>(c, "axis", -1);
    o.epsilon = value_or(c, "epsilon", 1e-3);
    o.name = name;
    return LayerNormalization(o);
  }
  if (class_name == "Embedding") {
    EmbeddingOptions o;
    if (c.contains("embeddings_initializer")) {
      o.embeddings_initializer = initializer_from_json(c["embeddings_initializer"]);
    }
    o.name = name;
    return Embedding(required<int64_t>(c, "input_dim"), required<int64_t>(c, "output_dim"), o);
  }
  if (class_name == "Rescaling") {
    return Rescaling(required<double>(c, "scale"), {.offset = value_or(c, "offset", 0.0), .name = name});
  }
  if (class_name == "MultiHeadAttention") {
    MultiHeadAttentionOptions o;
    if (c.contains("value_dim") && !c["value_dim"].is_null()) o.value_dim = c["value_dim"].get<int64_t>();
    o.dropout = value_or(c, "dropout", 0.0);
    o.use_bias = value_or(c, "use_bias", true);
    o.use_causal_mask = value_or(c, "use_causal_mask", false);
    if (c.contains("output_shape") && !c["output_shape"].is_null()) {
      // Keras also writes it as a one-element list.
      const nlohmann::json& shape = c["output_shape"];
      if (shape.is_array() && shape.size() != 1) {
        throw Unimplemented(fmt::format("MultiHeadAttention: output_shape {} has more than one axis", shape.dump()));
      }
      o.output_shape = shape.is_array() ? shape[0].get<int64_t>() : shape.get<int64_t>();
    }
    if (c.contains("kernel_initializer")) o.kernel_initializer = initializer_from_json(c["kernel_initializer"]);
    if (c.contains("bias_initializer")) o.bias_initializer = initializer_from_json(c["bias_initializer"]);
    if (c.contains("seed") && !c["seed"].is_null()) o.seed = c["seed"].get<uint64_t>();
    if (c.contains("attention_axes") && !c["attention_axes"].is_null()) {
      const auto axes =
          c["attention_axes"].is_array() ? c["attention_axes"] : nlohmann::json::array({c["attention_axes"]});
      if (axes.size() != 1 || (axes[0] != 1 && axes[0] != -2)) {
        throw Unimplemented(
            fmt::format("MultiHeadAttention: attention_axes {}: only the sequence axis 1", axes.dump()));
      }
    }
    o.name = name;
    return MultiHeadAttention(required<int64_t>(c, "num_heads"), required<int64_t>(c, "key_dim"), o);
  }
  if (class_name == "PositionEmbedding") {
    PositionEmbeddingOptions o;
    if (c.contains("initializer")) o.initializer = initializer_from_json(c["initializer"]);
    o.name = name;
    return PositionEmbedding(required<int64_t>(c, "sequence_length"), o);
  }
  if (class_name == "Normalization") {
    NormalizationOptions o;
    if (c.contains("axis")) {
      const nlohmann::json& axis = c["axis"];
      o.axis = axis.is_null()    ? std::vector<int64_t>{}
               : axis.is_array() ? axis.get<std::vector<int64_t>>()
                                 : std::vector<int64_t>{axis.get<int64_t>()};
    }
    // A scalar or a list, possibly nested (Keras writes numpy arrays with their shape): flattened in order.
    auto values = [&](const char* key) -> std::optional<std::vector<double>> {
      if (!c.contains(key) || c[key].is_null()) return std::nullopt;
      std::vector<double> flat;
      std::function<void(const nlohmann::json&)> collect = [&](const nlohmann::json& v) {
        if (!v.is_array()) return flat.push_back(v.get<double>());
        for (const auto& item : v) collect(item);
      };
      collect(c[key]);
      return flat;
    };
    o.mean = values("mean");
    o.variance = values("variance");
    o.invert = value_or(c, "invert", false);
    o.name = name;
    return Normalization(o);
  }
  if (class_name == "InputLayer") {
    const nlohmann::json& shape = c.contains("batch_input_shape") ? c["batch_input_shape"] : c.at("batch_shape");
    Dims dims;
    for (size_t i = 1; i < shape.size(); ++i) dims.push_back(shape[i].is_null() ? -1 : shape[i].get<int64_t>());
    // Keras 3.x may write the dtype as a DTypePolicy object {"class_name": "DTypePolicy", "config": {"name": ...}}.
    const nlohmann::json dtype = c.contains("dtype") && !c["dtype"].is_null() ? c["dtype"] : nlohmann::json("float32");
    return InputLayer(dims,
                      dtype_from_keras_name(dtype.is_object() ? dtype.at("config").at("name").get<std::string>()
                                                              : dtype.get<std::string>()),
                      name);
  }
  throw InvalidArgument(fmt::format("unknown layer class '{}'", class_name),
                        "Nimbus has Input(Layer), Dense, Conv2D, DepthwiseConv2D, MaxPooling2D, AveragePooling2D, "
                        "GlobalAveragePooling2D, GlobalAveragePooling1D, Flatten, Reshape, Activation, Add, "
                        "Concatenate, Dropout, BatchNormalization, LayerNormalization, Embedding, PositionEmbedding, "
                        "MultiHeadAttention, Rescaling, Normalization");
}
}  // namespace

Layer layer_from_config(const std::string& class_name, const nlohmann::json& config) {
  try {
    Layer layer = make_from_config(class_name, config);
    // Mixed precision per layer: dtype_policy: mixed_float16 (Keras 3 writes {"class_name": "DTypePolicy", ...}).
    if (config.contains("dtype_policy") && !config["dtype_policy"].is_null()) {
      const nlohmann::json& policy = config["dtype_policy"];
      layer->dtype_policy = DTypePolicy::named(policy.is_object() ? policy.at("config").at("name").get<std::string>()
                                                                  : policy.get<std::string>());
    }
    // Keras's layer.trainable = False (frozen layers keep their weights out of training).
    if (config.contains("trainable")) layer->trainable = config["trainable"].get<bool>();
    return layer;
  } catch (const ArgumentError& error) {
    throw InvalidArgument(fmt::format("{}: {}", class_name, error.message()), error.hint());
  } catch (const nlohmann::json::exception&) {
    throw InvalidArgument(
        fmt::format("{}: arguments {} are not of the form the layer takes", class_name, config.dump()),
        "compare them with the layer's arguments in docs/training.md, or Keras's");
  }
}

}  // namespace nimbus::nn
