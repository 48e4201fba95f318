#include "nimbus/train/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "nimbus/base/error.h"
#include "nimbus/data/dataset.h"
#include "nimbus/data/idx.h"
#include "nimbus/device/backend.h"
#include "nimbus/device/memory.h"
#include "nimbus/device/runtime.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/shape_ops.h"
#include "nimbus/train/checkpoint.h"
#include "nimbus/train/data_config.h"
#include "nimbus/train/memory_check.h"
#include "nimbus/train/run_directory.h"
#include "nimbus/train/trainer.h"
#include "rows.h"

namespace nimbus::train {

namespace {

using Json = nlohmann::json;

enum class Kind {
  kInt,
  kIntOrAuto,
  kNumber,
  kBool,
  kString,
  kSize,
  kIntList,
  kStringList,
  kStringOrObject,
  kList,
  kObject,
  kFrequency,
  kIntOrAutotune,
  kPatterns,
  kBoolOrString
};

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kInt: return "an integer";
    case Kind::kIntOrAuto: return "an integer or auto";
    case Kind::kSize: return "a byte count or a size such as 12GiB";
    case Kind::kNumber: return "a number";
    case Kind::kBool: return "a boolean (true or false)";
    case Kind::kString: return "a string";
    case Kind::kIntList: return "a list of integers";
    case Kind::kStringList: return "a list of strings";
    case Kind::kStringOrObject: return "a name or a mapping";
    case Kind::kList: return "a list";
    case Kind::kObject: return "a mapping";
    case Kind::kFrequency: return "epoch or a number of steps (an integer >= 1)";
    case Kind::kIntOrAutotune: return "an integer or autotune";
    case Kind::kPatterns: return "a glob pattern or a list of them";
    case Kind::kBoolOrString: return "a boolean or a file name";
  }
  return "";
}

// clang-tidy flags the implicit special members of a struct holding nlohmann::json, whose moves are noexcept.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct KeySpec {
  Kind kind;
  Json fallback;  // null: optional without default
};

// `keys` and the pipeline form's keys of data.train and data.validation (data_config.h), whose
// free-form parts (features, columns, steps, augment) data_config.cc checks.
std::map<std::string, KeySpec> with_pipeline_keys(std::map<std::string, KeySpec> keys) {
  const std::pair<const char*, Kind> pipeline_keys[] = {{"source", Kind::kString},
                                                        {"files", Kind::kPatterns},
                                                        {"compression", Kind::kString},
                                                        {"features", Kind::kObject},
                                                        {"columns", Kind::kList},
                                                        {"header", Kind::kBool},
                                                        {"delimiter", Kind::kString},
                                                        {"steps", Kind::kList},
                                                        {"augment", Kind::kList},
                                                        {"cache", Kind::kBoolOrString},
                                                        {"shuffle", Kind::kInt},
                                                        {"seed", Kind::kInt},
                                                        {"x", Kind::kPatterns},
                                                        {"y", Kind::kString},
                                                        {"drop_remainder", Kind::kBool},
                                                        {"prefetch", Kind::kIntOrAutotune},
                                                        {"num_parallel_calls", Kind::kIntOrAutotune}};
  for (const char* split : {"data.train.", "data.validation."}) {
    for (const auto& [key, kind] : pipeline_keys) keys[std::string(split) + key] = {kind, nullptr};
  }
  return keys;
}

// Every key the schema knows, by dotted path. Sections (model, compile, data, fit, runtime, and the
// optimizer, loss and data maps) are the prefixes of these.
const std::map<std::string, KeySpec>& schema() {
  static const std::map<std::string, KeySpec> keys = with_pipeline_keys({
      {"model.name", {Kind::kString, nullptr}},
      {"model.input_shape", {Kind::kIntList, nullptr}},
      {"model.input_dtype", {Kind::kString, "float32"}},
      {"model.layers", {Kind::kList, nullptr}},
      {"model.class_name", {Kind::kString, nullptr}},
      {"model.config", {Kind::kObject, nullptr}},
      // The rest of what Keras's to_json() writes beside class_name and config (Keras 3, then Keras 2).
      {"model.module", {Kind::kString, nullptr}},
      {"model.registered_name", {Kind::kString, nullptr}},
      {"model.build_config", {Kind::kObject, nullptr}},
      {"model.compile_config", {Kind::kObject, nullptr}},
      {"model.keras_version", {Kind::kString, nullptr}},
      {"model.backend", {Kind::kString, nullptr}},
      {"compile.optimizer", {Kind::kStringOrObject, "adam"}},
      {"compile.optimizer.name", {Kind::kString, nullptr}},
      {"compile.optimizer.learning_rate", {Kind::kNumber, nullptr}},
      {"compile.optimizer.momentum", {Kind::kNumber, nullptr}},
      {"compile.optimizer.nesterov", {Kind::kBool, nullptr}},
      {"compile.optimizer.beta_1", {Kind::kNumber, nullptr}},
      {"compile.optimizer.beta_2", {Kind::kNumber, nullptr}},
      {"compile.optimizer.epsilon", {Kind::kNumber, nullptr}},
      {"compile.optimizer.weight_decay", {Kind::kNumber, nullptr}},
      {"compile.optimizer.fused", {Kind::kBool, nullptr}},
      {"compile.optimizer.rho", {Kind::kNumber, nullptr}},
      {"compile.optimizer.centered", {Kind::kBool, nullptr}},
      {"compile.optimizer.clipnorm", {Kind::kNumber, nullptr}},
      {"compile.optimizer.global_clipnorm", {Kind::kNumber, nullptr}},
      {"compile.loss", {Kind::kStringOrObject, "sparse_categorical_crossentropy"}},
      {"compile.loss.name", {Kind::kString, nullptr}},
      {"compile.loss.from_logits", {Kind::kBool, nullptr}},
      {"compile.loss.label_smoothing", {Kind::kNumber, nullptr}},
      {"compile.metrics", {Kind::kStringList, Json::array()}},
      // data.train and data.validation: the IDX shorthand {images, labels, scale}, or the pipeline
      // form (data_config.h, keys added below) whose free-form parts data_config.cc checks.
      {"data.train", {Kind::kObject, nullptr}},
      {"data.train.images", {Kind::kString, nullptr}},
      {"data.train.labels", {Kind::kString, nullptr}},
      {"data.train.scale", {Kind::kNumber, 1.0 / 255}},
      {"data.validation", {Kind::kObject, nullptr}},
      {"data.validation.images", {Kind::kString, nullptr}},
      {"data.validation.labels", {Kind::kString, nullptr}},
      {"data.validation.scale", {Kind::kNumber, 1.0 / 255}},
      {"fit.epochs", {Kind::kInt, 1}},
      {"fit.batch_size", {Kind::kIntOrAuto, 32}},
      {"fit.steps_per_epoch", {Kind::kInt, nullptr}},
      {"fit.gradient_accumulation", {Kind::kIntOrAuto, 1}},
      {"fit.shuffle", {Kind::kBool, true}},
      {"fit.initial_epoch", {Kind::kInt, 0}},
      {"fit.verbose", {Kind::kInt, 1}},
      {"runtime.threads", {Kind::kInt, 0}},
      {"runtime.device", {Kind::kString, "cpu"}},
      {"runtime.graph", {Kind::kBool, true}},
      {"runtime.jit", {Kind::kBool, true}},
      {"runtime.allow_tf32", {Kind::kBool, false}},
      {"runtime.seed", {Kind::kInt, nullptr}},
      {"runtime.deterministic", {Kind::kBool, false}},
      {"runtime.precision", {Kind::kString, "float32"}},
      {"runtime.memory", {Kind::kObject, nullptr}},
      {"runtime.memory.mode", {Kind::kString, "growth"}},
      {"runtime.memory.fraction", {Kind::kNumber, 0.9}},
      {"runtime.memory.limit", {Kind::kSize, nullptr}},
      {"runtime.memory.trim_between_epochs", {Kind::kBool, false}},
      {"runtime.strategy", {Kind::kObject, nullptr}},
      {"runtime.strategy.type", {Kind::kString, "one_device"}},
      {"runtime.strategy.devices", {Kind::kStringList, nullptr}},
      {"runtime.strategy.collective_timeout", {Kind::kNumber, 600}},
      {"runtime.strategy.bucket_size", {Kind::kSize, "25MiB"}},
      {"runtime.strategy.overlap", {Kind::kBool, true}},
      {"checkpoint.save_freq", {Kind::kFrequency, "epoch"}},
      {"checkpoint.max_to_keep", {Kind::kInt, 3}},
      {"checkpoint.save_best", {Kind::kBool, true}},
      {"checkpoint.monitor", {Kind::kString, nullptr}},
      {"tensorboard.update_freq", {Kind::kFrequency, "epoch"}},
  });
  return keys;
}

bool is_section(const std::string& path) {
  static const char* sections[] = {"model", "compile", "data", "fit", "runtime", "checkpoint", "tensorboard"};
  return std::find(std::begin(sections), std::end(sections), path) != std::end(sections);
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string closest(const std::string& key, const std::vector<std::string>& known) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const std::string& candidate : known) {
    const size_t d = edit_distance(key, candidate);
    if (d < best_distance) best = candidate, best_distance = d;
  }
  return best;
}

std::vector<std::string> known_paths() {
  std::vector<std::string> paths;
  for (const auto& [path, spec] : schema()) paths.push_back(path);
  return paths;
}

// "valid keys under data.train: augment, cache, ...": the schema's keys beside `path`.
std::string keys_beside(const std::string& path) {
  const std::string parent = path.substr(0, path.rfind('.') == std::string::npos ? 0 : path.rfind('.'));
  if (parent.empty()) return "";
  std::vector<std::string> siblings;
  for (const auto& [known, spec] : schema()) {
    if (known.starts_with(parent + ".") && known.find('.', parent.size() + 1) == std::string::npos) {
      siblings.push_back(known.substr(parent.size() + 1));
    }
  }
  return siblings.empty() ? "" : fmt::format("valid keys under {}: {}", parent, fmt::join(siblings, ", "));
}

// YAML -> JSON, remembering each path's line for messages.
struct Source {
  std::string name;
  std::map<std::string, int> lines{};
  std::string where(const std::string& path) const {
    const auto it = lines.find(path);
    return it == lines.end() ? name : fmt::format("{}:{}", name, it->second);
  }
};

Json scalar_to_json(const YAML::Node& node) {
  if (node.Tag() == "!") return node.Scalar();  // quoted: a string
  const std::string& text = node.Scalar();
  if (text == "~" || text == "null" || text.empty()) return nullptr;
  if (text == "true" || text == "True") return true;
  if (text == "false" || text == "False") return false;
  int64_t integer = 0;
  if (YAML::convert<int64_t>::decode(node, integer) && text.find_first_of(".eE") == std::string::npos) return integer;
  double number = 0;
  if (YAML::convert<double>::decode(node, number)) return number;
  return text;
}

Json to_json(const YAML::Node& node, const std::string& path, Source& source) {
  if (node.Mark().line >= 0) source.lines.emplace(path, node.Mark().line + 1);
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      Json object = Json::object();
      for (const auto& entry : node) {
        const std::string key = entry.first.as<std::string>();
        const std::string child = path.empty() ? key : fmt::format("{}.{}", path, key);
        if (entry.first.Mark().line >= 0) source.lines[child] = entry.first.Mark().line + 1;
        object[key] = to_json(entry.second, child, source);
      }
      return object;
    }
    case YAML::NodeType::Sequence: {
      Json list = Json::array();
      for (size_t i = 0; i < node.size(); ++i) list.push_back(to_json(node[i], fmt::format("{}[{}]", path, i), source));
      return list;
    }
    case YAML::NodeType::Scalar: return scalar_to_json(node);
    default: return nullptr;
  }
}

bool matches(const Json& value, Kind kind) {
  switch (kind) {
    case Kind::kInt: return value.is_number_integer();
    case Kind::kIntOrAuto: return value.is_number_integer() || value == "auto";
    case Kind::kSize: return value.is_number_integer() || value.is_string();
    case Kind::kNumber: return value.is_number();
    case Kind::kBool: return value.is_boolean();
    case Kind::kString: return value.is_string();
    case Kind::kIntList:
      return value.is_array() &&
             std::all_of(value.begin(), value.end(), [](const Json& v) { return v.is_number_integer(); });
    case Kind::kStringList:
      return value.is_array() && std::all_of(value.begin(), value.end(), [](const Json& v) { return v.is_string(); });
    case Kind::kStringOrObject: return value.is_string() || value.is_object();
    case Kind::kList: return value.is_array();
    case Kind::kObject: return value.is_object();
    case Kind::kFrequency: return value == "epoch" || (value.is_number_integer() && value.get<int64_t>() >= 1);
    case Kind::kIntOrAutotune: return value.is_number_integer() || value == "autotune";
    case Kind::kPatterns: return value.is_string() || matches(value, Kind::kStringList);
    case Kind::kBoolOrString: return value.is_boolean() || value.is_string();
  }
  return false;
}

// Checks every key under `value` (at `path`) against the schema.
void check(const Json& value, const std::string& path, const Source& source) {
  if (!path.empty() && !is_section(path)) {
    const auto it = schema().find(path);
    if (it == schema().end()) {
      throw InvalidArgument(fmt::format("{}: unknown key '{}'", source.where(path), path),
                            fmt::format("did you mean '{}'? {}", closest(path, known_paths()), keys_beside(path)));
    }
    if (!value.is_null() && !matches(value, it->second.kind)) {
      throw InvalidArgument(
          fmt::format("{}: {} must be {}, got {}", source.where(path), path, kind_name(it->second.kind), value.dump()));
    }
    // Free-form parts: the model's layers (checked against each layer's arguments) and Keras configs.
    if (path == "model.layers" || path == "model.config" || path == "model.build_config" ||
        path == "model.compile_config" || path.ends_with(".features") || !value.is_object()) {
      return;
    }
  } else if (!value.is_object()) {
    throw InvalidArgument(
        fmt::format("{}: {} must be a mapping", source.where(path), path.empty() ? "the config" : path));
  }
  for (const auto& [key, child] : value.items()) {
    check(child, path.empty() ? key : fmt::format("{}.{}", path, key), source);
  }
}

void apply_override(Json& config, const std::string& assignment, Source& source) {
  const size_t equals = assignment.find('=');
  if (equals == std::string::npos) {
    throw InvalidArgument(fmt::format("--set {}: expected key.path=value", assignment), "e.g. --set fit.epochs=3");
  }
  const std::string path = assignment.substr(0, equals);
  if (!schema().count(path)) {
    throw InvalidArgument(fmt::format("--set {}: unknown key '{}'", assignment, path),
                          fmt::format("did you mean '{}'?", closest(path, known_paths())));
  }
  Json* node = &config;
  std::stringstream parts(path);
  std::string part;
  std::vector<std::string> keys;
  while (std::getline(parts, part, '.')) keys.push_back(part);
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    Json& next = (*node)[keys[i]];
    if (next.is_string() && i + 2 == keys.size()) next = Json{{"name", next}};  // "adam" -> {name: adam, ...}
    if (next.is_null()) next = Json::object();
    node = &next;
  }
  Source scratch{"--set"};
  (*node)[keys.back()] = to_json(YAML::Load(assignment.substr(equals + 1)), path, scratch);
  source.lines.erase(path);
}

void fill_defaults(Json& config) {
  for (const auto& [path, spec] : schema()) {
    if (spec.fallback.is_null()) continue;
    const size_t dot = path.find('.');
    const std::string section = path.substr(0, dot), rest = path.substr(dot + 1);
    if (rest.find('.') != std::string::npos) {  // data.train.scale: only when the parent exists
      const std::string parent = rest.substr(0, rest.find('.'));
      if (!config[section].contains(parent) || !config[section][parent].is_object()) continue;
      Json& object = config[section][parent];
      if (is_pipeline_split(object)) continue;  // the pipeline form's defaults live in data_config.cc
      const std::string key = rest.substr(rest.find('.') + 1);
      if (!object.contains(key)) object[key] = spec.fallback;
      continue;
    }
    Json& value = config[section][rest];
    if (value.is_null()) value = spec.fallback;
    // {learning_rate: 0.01} alone keeps the default optimizer (or loss) by name.
    if (spec.kind == Kind::kStringOrObject && value.is_object() && !value.contains("name")) {
      value["name"] = spec.fallback;
    }
  }
}

// Each layer entry is {ClassName: {arguments}}; arguments are checked against the layer's own config keys.
void check_layers(const Json& config, const Source& source) {
  const Json& model = config.at("model");
  if (model.contains("class_name")) return;  // Keras's to_json form, read by model_from_config
  if (!model.contains("layers") || !model.contains("input_shape")) {
    throw InvalidArgument(fmt::format("{}: the model needs input_shape and layers", source.where("model")),
                          "or Keras's to_json() form with class_name and config");
  }
  const Json& layers = model.at("layers");
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string path = fmt::format("model.layers[{}]", i);
    const Json& entry = layers[i];
    if (!entry.is_object() || entry.size() != 1) {
      throw InvalidArgument(
          fmt::format("{}: layer {} must be one 'ClassName: {{arguments}}' entry", source.where(path), i),
          "e.g. - Dense: {units: 10}");
    }
    const std::string class_name = entry.begin().key();
    const Json arguments = entry.begin().value().is_null() ? Json::object() : entry.begin().value();
    const nn::Layer layer = nn::layer_from_config(class_name, arguments);
    const Json known = layer->get_config();
    for (const auto& [key, value] : arguments.items()) {
      // inbound: the functional form (nn::model_from_layer_list); dtype_policy: any layer's (layer_from_config).
      if (!known.contains(key) && key != "inbound" && key != "dtype_policy") {
        std::vector<std::string> names;
        for (const auto& [name, v] : known.items()) names.push_back(name);
        throw InvalidArgument(
            fmt::format("{}: layer {} ({}) has no argument '{}'",
                        source.where(fmt::format("{}.{}.{}", path, class_name, key)), i, class_name, key),
            fmt::format("did you mean '{}'?", closest(key, names)));
      }
    }
  }
}

// IDX images as f32, times `scale`, shaped (samples, input_shape...).
Tensor load_images(const Json& split, const nn::Dims& input_shape) {
  Tensor images = data::read_idx(split.at("images").get<std::string>());
  std::vector<int64_t> shape = {images.dim(0)};
  shape.insert(shape.end(), input_shape.begin(), input_shape.end());
  const double scale = split.value("scale", 1.0 / 255);
  images = images.to(DType::kF32);
  if (scale != 1) images = images * scale;
  return reshape(images, shape);
}

nn::Dims input_shape_of(const nn::Model& model) {
  const auto& shape = model.inputs()[0].shape();
  return nn::Dims(shape.begin() + 1, shape.end());
}

std::shared_ptr<Optimizer> make_optimizer(const Json& spec) {
  const Json options = spec.is_string() ? Json{{"name", spec}} : spec;
  const std::string name = options.value("name", std::string("adam"));
  std::optional<double> clipnorm, global_clipnorm;
  if (options.contains("clipnorm")) clipnorm = options["clipnorm"].get<double>();
  if (options.contains("global_clipnorm")) global_clipnorm = options["global_clipnorm"].get<double>();
  if (name == "sgd") {
    return SGD({.learning_rate = options.value("learning_rate", 0.01),
                .momentum = options.value("momentum", 0.0),
                .nesterov = options.value("nesterov", false),
                .clipnorm = clipnorm,
                .global_clipnorm = global_clipnorm});
  }
  if (name == "adam" || name == "adamw") {
    AdamWOptions o{.learning_rate = options.value("learning_rate", 1e-3),
                   .weight_decay = options.value("weight_decay", name == "adamw" ? 0.004 : 0.0),
                   .beta_1 = options.value("beta_1", 0.9),
                   .beta_2 = options.value("beta_2", 0.999),
                   .epsilon = options.value("epsilon", 1e-7),
                   .clipnorm = clipnorm,
                   .global_clipnorm = global_clipnorm};
    if (options.contains("fused")) o.fused = options["fused"].get<bool>();
    return AdamW(o);
  }
  if (name == "rmsprop") {
    return RMSprop({.learning_rate = options.value("learning_rate", 1e-3),
                    .rho = options.value("rho", 0.9),
                    .momentum = options.value("momentum", 0.0),
                    .epsilon = options.value("epsilon", 1e-7),
                    .centered = options.value("centered", false),
                    .clipnorm = clipnorm,
                    .global_clipnorm = global_clipnorm});
  }
  return get_optimizer(name, options.value("learning_rate", 1e-3));  // the error lists the names
}

// A pipeline split's (x, y), every batch joined: validation data as fit(x, y) and evaluate take it.
std::pair<Tensor, Tensor> collect_pipeline(const Json& split, const std::string& section) {
  const uint64_t seed = runtime_options().seed.value_or(0);
  std::vector<Tensor> xs, ys;
  data::Iterator batches = dataset_from_config(split, section, 256, seed).iterator(seed, 0);
  while (auto batch = batches.next()) {
    xs.push_back((*batch)[0]);
    ys.push_back((*batch)[1]);
  }
  if (xs.empty()) throw DataError(fmt::format("{}: the pipeline yields no data", section));
  return {concat(xs, 0), concat(ys, 0)};
}

// data.train as fit takes it: the IDX shorthand's tensors, or the pipeline with its first batch (the
// shapes that the memory check and the model's build need).
struct TrainingData {
  Tensor x, y;
  std::optional<data::Dataset> pipeline;
};

TrainingData training_data(const Json& config, const nn::Model& model) {
  const Json& split = config.at("data").at("train");
  if (!is_pipeline_split(split)) {
    auto [x, y] = load_idx_split(split, model, "data.train");
    return {x, y, std::nullopt};
  }
  const Json& batch_size = config.at("fit").at("batch_size");
  if (!batch_size.is_number_integer()) {
    throw InvalidArgument("fit.batch_size: auto needs the IDX form of data.train (a pipeline batches as it is built)",
                          "give fit.batch_size a number");
  }
  const uint64_t seed = runtime_options().seed.value_or(0);
  data::Dataset pipeline = dataset_from_config(split, "data.train", batch_size.get<int64_t>(), seed);
  std::optional<data::Element> first = pipeline.iterator(seed, 0).next();
  if (!first) throw DataError("data.train: the pipeline yields no batch");
  return {(*first)[0], (*first)[1], pipeline};
}

}  // namespace

Loss loss_from_config(const nlohmann::json& spec) {
  const Json options = spec.is_string() ? Json{{"name", spec}} : spec;
  const std::string name = options.value("name", std::string("sparse_categorical_crossentropy"));
  const CrossentropyOptions cross{.from_logits = options.value("from_logits", false),
                                  .label_smoothing = options.value("label_smoothing", 0.0)};
  if (name == "sparse_categorical_crossentropy") return SparseCategoricalCrossentropy(cross);
  if (name == "categorical_crossentropy") return CategoricalCrossentropy(cross);
  if (name == "binary_crossentropy") return BinaryCrossentropy(cross);
  return get_loss(name);
}

nlohmann::json parse_config(const std::string& yaml_text, const std::string& source_name,
                            const std::vector<std::string>& overrides) {
  Source source{source_name};
  Json config;
  try {
    config = to_json(YAML::Load(yaml_text), "", source);
  } catch (const YAML::Exception& error) {
    throw InvalidArgument(fmt::format("{}:{}: {}", source_name, error.mark.line + 1, error.msg));
  }
  if (config.is_null()) config = Json::object();
  check(config, "", source);
  for (const std::string& assignment : overrides) apply_override(config, assignment, source);
  check(config, "", source);
  if (!config.contains("model")) throw InvalidArgument(fmt::format("{}: no model section", source_name));
  if (!config.contains("data") || !config["data"].contains("train")) {
    throw InvalidArgument(fmt::format("{}: no data.train section", source_name),
                          "data.train: {images: FILE, labels: FILE} (IDX files), or a pipeline with a source "
                          "(docs/data.md)");
  }
  fill_defaults(config);
  for (const char* split : {"train", "validation"}) {
    if (!config["data"].contains(split)) continue;
    const std::string section = std::string("data.") + split;
    if (is_pipeline_split(config["data"][split])) {
      check_pipeline_split(config["data"][split], section, [&](const std::string& path) { return source.where(path); });
      continue;
    }
    for (const char* key : {"images", "labels"}) {
      if (!config["data"][split].contains(key)) {
        throw InvalidArgument(
            fmt::format("{}: data.{} needs '{}'", source.where(std::string("data.") + split), split, key));
      }
    }
  }
  check_layers(config, source);
  return config;
}

nlohmann::json load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  if (!in) throw NotFound(fmt::format("{}: cannot open the config", path));
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path, overrides);
}

namespace {

// runtime.device: a device this machine and build lack is an Unavailable naming what is missing
// (no CUDA build, no driver, no GPU) before anything is loaded.
void check_training_device(const std::string& text) {
  Device device;
  try {
    device = Device::parse(text);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("runtime.device: " + e.message(), e.hint());
  }
  if (device.is_cpu()) return;
  try {
    default_stream_for(device);  // checks the build, the driver, and the device's index
  } catch (const Unavailable& e) {
    throw Unavailable(fmt::format("runtime.device: {}: {}", text, e.message()), e.hint());
  } catch (const NotFound& e) {
    throw NotFound(fmt::format("runtime.device: {}: {}", text, e.message()), e.hint());
  }
}

}  // namespace

void configure_memory_from_config(const nlohmann::json& config) {
  MemoryOptions options;
  const Json& runtime = config.at("runtime");
  if (runtime.contains("memory") && runtime["memory"].is_object()) {
    const Json& memory = runtime["memory"];
    const Json limit = memory.value("limit", Json());
    const std::string limit_text = limit.is_null()     ? std::string("none")
                                   : limit.is_string() ? limit.get<std::string>()
                                                       : std::to_string(limit.get<int64_t>());
    options =
        parse_memory_options(memory.value("mode", std::string("growth")), memory.value("fraction", 0.9), limit_text);
  }
  configure_memory(Device::cpu(), options);
}

void configure_runtime_from_config(const nlohmann::json& config) {
  const Json& runtime = config.at("runtime");
  RuntimeOptions runtime_options;
  runtime_options.threads = runtime.at("threads").get<int>();
  runtime_options.deterministic = runtime.at("deterministic").get<bool>();
  if (runtime.contains("seed") && !runtime["seed"].is_null()) runtime_options.seed = runtime["seed"].get<uint64_t>();
  runtime_options.graph = runtime.at("graph").get<bool>();
  runtime_options.jit = runtime.at("jit").get<bool>();
  runtime_options.allow_tf32 = runtime.at("allow_tf32").get<bool>();
  configure_runtime(runtime_options);
  check_training_device(runtime.at("device").get<std::string>());
  configure_memory_from_config(config);
}

namespace {
// The config's runtime.precision as the global dtype policy while its model's layers are made
// (each layer keeps the policy it was made under); the previous policy comes back after.
class ConfigPolicyScope {
 public:
  explicit ConfigPolicyScope(const nlohmann::json& config) : previous_(nn::global_policy()) {
    const std::string name = config.at("runtime").value("precision", std::string("float32"));
    try {
      nn::set_global_policy(name);
    } catch (const InvalidArgument& error) {
      throw InvalidArgument("runtime.precision: " + error.message(), error.hint());
    }
  }
  ~ConfigPolicyScope() { nn::set_global_policy(previous_); }
  ConfigPolicyScope(const ConfigPolicyScope&) = delete;
  ConfigPolicyScope& operator=(const ConfigPolicyScope&) = delete;

 private:
  nn::DTypePolicy previous_;
};
}  // namespace

nn::Model model_from_train_config(const nlohmann::json& config) {
  const ConfigPolicyScope policy(config);
  const Json& model_section = config.at("model");
  nn::Model model = [&]() -> nn::Model {
    if (model_section.contains("class_name")) return nn::model_from_config(model_section);
    return nn::model_from_layer_list(model_section.at("input_shape").get<nn::Dims>(),
                                     nn::dtype_from_keras_name(model_section.at("input_dtype").get<std::string>()),
                                     model_section.at("layers"), model_section.value("name", std::string()));
  }();
  if (model.inputs().size() != 1) throw Unimplemented("nimbus train: models with one input only, for now");
  if (model.inputs()[0].shape().size() < 1) throw InvalidArgument("nimbus train: the model has no input shape");
  return model;
}

namespace {
// runtime.strategy, or for a runtime.device other than cpu:0 (a GPU, a logical CPU), one replica
// there (OneDevice): the trainer places the model, the optimizer's state and the batches on it.
std::shared_ptr<distribute::Strategy> strategy_of(const Json& runtime) {
  auto strategy =
      distribute::strategy_from_config(runtime.value("strategy", Json()), runtime.at("threads").get<int>(), "config");
  const std::string text = runtime.at("device").get<std::string>();
  const Device device = Device::parse(text);
  if (device == Device::cpu()) return strategy;
  if (strategy->name() != "one_device") {
    throw Unimplemented(fmt::format("runtime.device: {} with runtime.strategy.type {}", text, strategy->name()),
                        "one device only for now: drop runtime.strategy, or train on the CPU");
  }
  return distribute::OneDevice(device);
}
}  // namespace

Trainer compile_from_config(nn::Model model, const nlohmann::json& config) {
  const Json& compile_section = config.at("compile");
  const Json& runtime = config.at("runtime");
  return compile(std::move(model), {.optimizer = make_optimizer(compile_section.at("optimizer")),
                                    .loss = loss_from_config(compile_section.at("loss")),
                                    .metrics = compile_section.at("metrics").get<std::vector<std::string>>(),
                                    .strategy = strategy_of(runtime)});
}

std::pair<Tensor, Tensor> load_idx_split(const nlohmann::json& split, const nn::Model& model,
                                         const std::string& section) {
  if (is_pipeline_split(split)) return collect_pipeline(split, section);
  const Tensor images = load_idx_images(split, model);
  const Tensor labels = data::read_idx(split.at("labels").get<std::string>());
  if (images.dim(0) != labels.dim(0)) {
    throw DataError(fmt::format("{}: {} images ({}) but {} labels ({})", section, images.dim(0),
                                split.at("images").get<std::string>(), labels.dim(0),
                                split.at("labels").get<std::string>()));
  }
  return {images, labels};
}

Tensor load_idx_images(const nlohmann::json& split, const nn::Model& model) {
  if (is_pipeline_split(split)) return collect_pipeline(split, "data").first;
  return load_images(split, input_shape_of(model));
}

namespace {

// Multi-worker: every worker waits where rank 0 saves a checkpoint (after rank 0's save, the callbacks
// running in order), so that a checkpoint is whole before any worker goes on.
class BarrierAfterCheckpoints : public Callback {
 public:
  BarrierAfterCheckpoints(distribute::Strategy& strategy, int64_t save_freq)
      : strategy_(strategy), save_freq_(save_freq) {}
  void on_train_batch_end(Trainer& trainer, int64_t, const Logs&) override {
    if (save_freq_ > 0 && trainer.position().global_step % save_freq_ == 0) strategy_.barrier();
  }
  void on_epoch_end(Trainer&, int, const Logs&) override {
    if (save_freq_ == 0) strategy_.barrier();
  }

 private:
  distribute::Strategy& strategy_;
  int64_t save_freq_;
};

}  // namespace

nlohmann::json run_config(const nlohmann::json& config, std::ostream& out, const RunOptions& options) {
  configure_runtime_from_config(config);
  nn::Model model = model_from_train_config(config);
  const Json& fit_section = config.at("fit");
  if (fit_section.at("verbose").get<int>() > 0) out << model.summary_string();

  const Json& data = config.at("data");
  const TrainingData train_data = training_data(config, model);
  const Tensor& x_train = train_data.x;
  const Tensor& y_train = train_data.y;
  FitOptions fit;
  fit.epochs = fit_section.at("epochs").get<int>();
  fit.shuffle = fit_section.at("shuffle").get<bool>();
  fit.seed = runtime_options().seed;
  if (fit_section.contains("steps_per_epoch") && !fit_section["steps_per_epoch"].is_null()) {
    fit.steps_per_epoch = fit_section["steps_per_epoch"].get<int64_t>();
  }
  fit.initial_epoch = fit_section.at("initial_epoch").get<int>();
  fit.verbose = fit_section.at("verbose").get<int>();
  fit.output = &out;
  if (data.contains("validation")) {
    fit.validation_data = load_idx_split(data.at("validation"), model, "data.validation");
  }

  Trainer trainer = compile_from_config(model, config);
  const MemoryDecision memory = check_memory_before_fit(trainer, x_train, y_train, config, out);
  fit.batch_size = memory.batch_size;
  fit.gradient_accumulation = memory.gradient_accumulation;
  RunDirectory run(options.run_dir.empty() ? default_run_dir() : options.run_dir);
  if (fit.verbose > 0) out << "Run directory: " << run.path() << "\n" << std::flush;
  std::optional<TrainingPosition> resumed;
  if (options.resume) {
    if (!model.built()) (void)model(rows(x_train, 0, 1), false);
    const std::string checkpoints =
        options.chief_run_dir.empty() ? run.checkpoints() : RunDirectory(options.chief_run_dir).checkpoints();
    const CheckpointInfo checkpoint = restore_latest_checkpoint(trainer, checkpoints, std::cerr);
    resumed = checkpoint.position;
    fit = Trainer::resumed(fit, checkpoint.position);
    out << fmt::format("Resuming from {}: {} epochs and {} steps of epoch {} done (global step {})\n", checkpoint.path,
                       resumed->epochs_done, resumed->steps_in_epoch, resumed->epochs_done + 1, resumed->global_step)
        << std::flush;
  }
  run.write_config(config);

  const Json& checkpoint = config.at("checkpoint");
  const Json& tensorboard = config.at("tensorboard");
  RunSettings settings{
      .save_freq = checkpoint.at("save_freq").is_number() ? checkpoint.at("save_freq").get<int64_t>() : 0,
      .max_to_keep = checkpoint.at("max_to_keep").get<int>(),
      .save_best = checkpoint.at("save_best").get<bool>(),
      .monitor = checkpoint.contains("monitor") && checkpoint["monitor"].is_string()
                     ? checkpoint["monitor"].get<std::string>()
                     : (fit.validation_data ? "val_loss" : "loss"),
      .tensorboard_update_freq =
          tensorboard.at("update_freq").is_number() ? tensorboard.at("update_freq").get<int64_t>() : 0,
      .write_checkpoints = options.chief_run_dir.empty()};
  fit.callbacks = run.callbacks(settings, resumed);
  if (trainer.strategy() != nullptr && trainer.strategy()->num_workers() > 1) {
    fit.callbacks.push_back(std::make_shared<BarrierAfterCheckpoints>(*trainer.strategy(), settings.save_freq));
  }

  // The monitor records samples and the timeline in the run directory (and serves /metrics when
  // asked); the run directory's step lines carry the profiler's spans of the step being logged.
  monitor::RunMonitorOptions monitoring = options.monitoring ? *options.monitoring : monitor::RunMonitorOptions{};
  monitoring.run_dir = run.path();
  monitoring.step_lines = false;
  monitor::RunMonitor monitor(monitoring, std::cerr);
  monitor.attach(trainer.profiler());
  run.metrics().add_step_fields([device = monitoring.device](Trainer& trainer, nlohmann::ordered_json& line) {
    const Json fields = monitor::step_line_fields(trainer.profiler().current_step(), device);
    for (const auto& [name, value] : fields.items()) line[name] = value;
  });
  const std::string oom_checkpoint = run.path() + "/oom_checkpoint.safetensors";
  const History history =
      train_data.pipeline
          ? fit_saving_on_out_of_memory(trainer, *train_data.pipeline, x_train.device(), fit, config, oom_checkpoint)
          : fit_saving_on_out_of_memory(trainer, x_train, y_train, fit, config, oom_checkpoint);
  Json extra = {{"micro_batch", memory.micro_batch()},
                {"gradient_accumulation", memory.gradient_accumulation},
                {"memory", memory.to_json()}};
  // What the input pipeline did in the last epoch: per node, parallelism and buffers (AUTOTUNE's
  // choices, with why), busy and wait times.
  if (!history.input_pipeline_stats.empty()) extra["input_pipeline"] = Json::parse(history.input_pipeline_stats);
  extra.update(monitor::summary_fields(trainer.profiler().totals()));
  Json summary = run.finish(history, trainer, extra);
  monitor.finish();
  return summary;
}

}  // namespace nimbus::train
