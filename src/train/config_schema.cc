#include "nimbus/train/config_schema.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "closest_name.h"
#include "config_source.h"
#include "config_validation.h"
#include "nimbus/base/error.h"
#include "nimbus/train/data_config.h"
#include "nimbus/train/yaml_loader.h"

namespace nimbus::train {

namespace {

using Json = nlohmann::json;

// `keys` and the pipeline form's keys of data.train and data.validation (data_config.h), whose
// free-form parts (features, columns, steps, augment) data_config.cc checks.
std::map<std::string, ConfigKey> with_pipeline_keys(std::map<std::string, ConfigKey> keys) {
  const std::pair<const char*, ConfigType> pipeline_keys[] = {{"source", ConfigType::kString},
                                                              {"files", ConfigType::kPatterns},
                                                              {"compression", ConfigType::kString},
                                                              {"features", ConfigType::kObject},
                                                              {"columns", ConfigType::kList},
                                                              {"header", ConfigType::kBool},
                                                              {"delimiter", ConfigType::kString},
                                                              {"steps", ConfigType::kList},
                                                              {"augment", ConfigType::kList},
                                                              {"cache", ConfigType::kBoolOrString},
                                                              {"shuffle", ConfigType::kInt},
                                                              {"seed", ConfigType::kInt},
                                                              {"x", ConfigType::kPatterns},
                                                              {"y", ConfigType::kString},
                                                              {"drop_remainder", ConfigType::kBool},
                                                              {"prefetch", ConfigType::kIntOrAutotune},
                                                              {"num_parallel_calls", ConfigType::kIntOrAutotune},
                                                              {"ignore_errors", ConfigType::kBool},
                                                              {"max_bad_records", ConfigType::kInt},
                                                              {"allow_truncated_images", ConfigType::kBool},
                                                              {"allow_non_finite", ConfigType::kBool},
                                                              {"tokenizer", ConfigType::kStringOrObject},
                                                              {"tokenizer.sentencepiece", ConfigType::kString},
                                                              {"sequence_length", ConfigType::kInt},
                                                              {"stride", ConfigType::kInt},
                                                              {"format", ConfigType::kString},
                                                              {"validation_split", ConfigType::kNumber}};
  for (const char* split : {"data.train.", "data.validation."}) {
    for (const auto& [key, type] : pipeline_keys) keys[std::string(split) + key] = {type, nullptr};
  }
  return keys;
}

}  // namespace

const std::map<std::string, ConfigKey>& config_schema() {
  static const std::map<std::string, ConfigKey> keys = with_pipeline_keys({
      {"model.name", {ConfigType::kString, nullptr}},
      {"model.input_shape", {ConfigType::kIntList, nullptr}},
      {"model.input_dtype", {ConfigType::kString, "float32"}},
      {"model.layers", {ConfigType::kList, nullptr}},
      {"model.class_name", {ConfigType::kString, nullptr}},
      {"model.config", {ConfigType::kObject, nullptr}},
      // The rest of what Keras's to_json() writes beside class_name and config (Keras 3, then Keras 2).
      {"model.module", {ConfigType::kString, nullptr}},
      {"model.registered_name", {ConfigType::kString, nullptr}},
      {"model.build_config", {ConfigType::kObject, nullptr}},
      {"model.compile_config", {ConfigType::kObject, nullptr}},
      {"model.keras_version", {ConfigType::kString, nullptr}},
      {"model.backend", {ConfigType::kString, nullptr}},
      {"compile.optimizer", {ConfigType::kStringOrObject, "adam"}},
      {"compile.optimizer.name", {ConfigType::kString, nullptr}},
      {"compile.optimizer.learning_rate", {ConfigType::kNumber, nullptr}},
      {"compile.optimizer.momentum", {ConfigType::kNumber, nullptr}},
      {"compile.optimizer.nesterov", {ConfigType::kBool, nullptr}},
      {"compile.optimizer.beta_1", {ConfigType::kNumber, nullptr}},
      {"compile.optimizer.beta_2", {ConfigType::kNumber, nullptr}},
      {"compile.optimizer.epsilon", {ConfigType::kNumber, nullptr}},
      {"compile.optimizer.weight_decay", {ConfigType::kNumber, nullptr}},
      {"compile.optimizer.fused", {ConfigType::kBool, nullptr}},
      {"compile.optimizer.rho", {ConfigType::kNumber, nullptr}},
      {"compile.optimizer.centered", {ConfigType::kBool, nullptr}},
      {"compile.optimizer.clipnorm", {ConfigType::kNumber, nullptr}},
      {"compile.optimizer.global_clipnorm", {ConfigType::kNumber, nullptr}},
      {"compile.loss", {ConfigType::kStringOrObject, "sparse_categorical_crossentropy"}},
      {"compile.loss.name", {ConfigType::kString, nullptr}},
      {"compile.loss.from_logits", {ConfigType::kBool, nullptr}},
      {"compile.loss.label_smoothing", {ConfigType::kNumber, nullptr}},
      {"compile.metrics", {ConfigType::kStringList, Json::array()}},
      // data.train and data.validation: the IDX shorthand {images, labels, scale}, or the pipeline
      // form (data_config.h, keys added below) whose free-form parts data_config.cc checks.
      {"data.train", {ConfigType::kObject, nullptr}},
      {"data.train.images", {ConfigType::kString, nullptr}},
      {"data.train.labels", {ConfigType::kString, nullptr}},
      {"data.train.scale", {ConfigType::kNumber, 1.0 / 255}},
      {"data.validation", {ConfigType::kObject, nullptr}},
      {"data.validation.images", {ConfigType::kString, nullptr}},
      {"data.validation.labels", {ConfigType::kString, nullptr}},
      {"data.validation.scale", {ConfigType::kNumber, 1.0 / 255}},
      {"fit.epochs", {ConfigType::kInt, 1}},
      {"fit.batch_size", {ConfigType::kIntOrAuto, 32}},
      {"fit.steps_per_epoch", {ConfigType::kInt, nullptr}},
      {"fit.gradient_accumulation", {ConfigType::kIntOrAuto, 1}},
      {"fit.shuffle", {ConfigType::kBool, true}},
      {"fit.initial_epoch", {ConfigType::kInt, 0}},
      {"fit.verbose", {ConfigType::kInt, 1}},
      {"runtime.threads", {ConfigType::kInt, 0}},
      {"runtime.device", {ConfigType::kString, "auto"}},
      {"runtime.graph", {ConfigType::kBool, true}},
      {"runtime.jit", {ConfigType::kBool, true}},
      {"runtime.allow_tf32", {ConfigType::kBool, false}},
      {"runtime.seed", {ConfigType::kInt, nullptr}},
      {"runtime.deterministic", {ConfigType::kBool, false}},
      {"runtime.precision", {ConfigType::kString, "float32"}},
      {"runtime.memory", {ConfigType::kObject, nullptr}},
      {"runtime.memory.mode", {ConfigType::kString, "growth"}},
      {"runtime.memory.fraction", {ConfigType::kNumber, 0.9}},
      {"runtime.memory.limit", {ConfigType::kSize, nullptr}},
      {"runtime.memory.trim_between_epochs", {ConfigType::kBool, false}},
      {"runtime.strategy", {ConfigType::kObject, nullptr}},
      {"runtime.strategy.type", {ConfigType::kString, "one_device"}},
      {"runtime.strategy.devices", {ConfigType::kStringList, nullptr}},
      {"runtime.strategy.collective_timeout", {ConfigType::kNumber, 600}},
      {"runtime.strategy.bucket_size", {ConfigType::kSize, "25MiB"}},
      {"runtime.strategy.overlap", {ConfigType::kBool, true}},
      {"checkpoint.save_freq", {ConfigType::kFrequency, "epoch"}},
      {"checkpoint.max_to_keep", {ConfigType::kInt, 3}},
      {"checkpoint.save_best", {ConfigType::kBool, true}},
      {"checkpoint.monitor", {ConfigType::kString, nullptr}},
      {"tensorboard.update_freq", {ConfigType::kFrequency, "epoch"}},
  });
  return keys;
}

const char* config_type_name(ConfigType type) {
  switch (type) {
    case ConfigType::kInt: return "an integer";
    case ConfigType::kIntOrAuto: return "an integer or auto";
    case ConfigType::kSize: return "a byte count or a size such as 12GiB";
    case ConfigType::kNumber: return "a number";
    case ConfigType::kBool: return "a boolean (true or false)";
    case ConfigType::kString: return "a string";
    case ConfigType::kIntList: return "a list of integers";
    case ConfigType::kStringList: return "a list of strings";
    case ConfigType::kStringOrObject: return "a name or a mapping";
    case ConfigType::kList: return "a list";
    case ConfigType::kObject: return "a mapping";
    case ConfigType::kFrequency: return "epoch or a number of steps (an integer >= 1)";
    case ConfigType::kIntOrAutotune: return "an integer or autotune";
    case ConfigType::kPatterns: return "a glob pattern or a list of them";
    case ConfigType::kBoolOrString: return "a boolean or a file name";
  }
  return "";
}

bool matches(const nlohmann::json& value, ConfigType type) {
  switch (type) {
    case ConfigType::kInt: return value.is_number_integer();
    case ConfigType::kIntOrAuto: return value.is_number_integer() || value == "auto";
    case ConfigType::kSize: return value.is_number_integer() || value.is_string();
    case ConfigType::kNumber: return value.is_number();
    case ConfigType::kBool: return value.is_boolean();
    case ConfigType::kString: return value.is_string();
    case ConfigType::kIntList:
      return value.is_array() &&
             std::all_of(value.begin(), value.end(), [](const Json& v) { return v.is_number_integer(); });
    case ConfigType::kStringList:
      return value.is_array() && std::all_of(value.begin(), value.end(), [](const Json& v) { return v.is_string(); });
    case ConfigType::kStringOrObject: return value.is_string() || value.is_object();
    case ConfigType::kList: return value.is_array();
    case ConfigType::kObject: return value.is_object();
    case ConfigType::kFrequency: return value == "epoch" || (value.is_number_integer() && value.get<int64_t>() >= 1);
    case ConfigType::kIntOrAutotune: return value.is_number_integer() || value == "autotune";
    case ConfigType::kPatterns: return value.is_string() || matches(value, ConfigType::kStringList);
    case ConfigType::kBoolOrString: return value.is_boolean() || value.is_string();
  }
  return false;
}

namespace {

bool is_section(const std::string& path) {
  static const char* sections[] = {"model", "compile", "data", "fit", "runtime", "checkpoint", "tensorboard"};
  return std::find(std::begin(sections), std::end(sections), path) != std::end(sections);
}

std::vector<std::string> known_paths() {
  std::vector<std::string> paths;
  for (const auto& [path, spec] : config_schema()) paths.push_back(path);
  return paths;
}

// "valid keys under data.train: augment, cache, ...": the schema's keys beside `path`.
std::string keys_beside(const std::string& path) {
  const std::string parent = path.substr(0, path.rfind('.') == std::string::npos ? 0 : path.rfind('.'));
  if (parent.empty()) return "";
  std::vector<std::string> siblings;
  for (const auto& [known, spec] : config_schema()) {
    if (known.starts_with(parent + ".") && known.find('.', parent.size() + 1) == std::string::npos) {
      siblings.push_back(known.substr(parent.size() + 1));
    }
  }
  return siblings.empty() ? "" : fmt::format("valid keys under {}: {}", parent, fmt::join(siblings, ", "));
}

// Checks every key under `value` (at `path`) against the schema.
void check(const Json& value, const std::string& path, const ConfigSource& source) {
  if (!path.empty() && !is_section(path)) {
    const auto it = config_schema().find(path);
    if (it == config_schema().end()) {
      throw InvalidArgument(fmt::format("{}: unknown key '{}'", source.where(path), path),
                            fmt::format("did you mean '{}'? {}", closest_name(path, known_paths()), keys_beside(path)));
    }
    if (value.is_null() && !it->second.fallback.is_null()) {
      throw InvalidArgument(fmt::format("{}: {} is empty", source.where(path), path),
                            fmt::format("give it a value, or leave the key out for its default, {}",
                                        it->second.fallback.is_string() ? it->second.fallback.get<std::string>()
                                                                        : it->second.fallback.dump()));
    }
    if (!value.is_null() && !matches(value, it->second.type)) {
      throw InvalidArgument(fmt::format("{}: {} must be {}, got {}", source.where(path), path,
                                        config_type_name(it->second.type), as_written(value)));
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

void apply_override(Json& config, const std::string& assignment, ConfigSource& source) {
  // Messages name the flag; a long one is cut there, not echoed whole.
  const std::string flag = assignment.size() <= 120
                               ? assignment
                               : fmt::format("{}... ({} characters)", assignment.substr(0, 100), assignment.size());
  const size_t equals = assignment.find('=');
  if (equals == std::string::npos) {
    throw InvalidArgument(fmt::format("--set {}: expected KEY=VALUE", flag), "e.g. --set fit.epochs=3");
  }
  const std::string path = assignment.substr(0, equals);
  if (!config_schema().count(path)) {
    throw InvalidArgument(fmt::format("--set {}: unknown key '{}'", flag, path),
                          fmt::format("did you mean '{}'?", closest_name(path, known_paths())));
  }
  const std::string text = assignment.substr(equals + 1);
  if (text.find_first_not_of(" \t") == std::string::npos) {
    throw InvalidArgument(
        fmt::format("--set {}: no value after '='", flag),
        fmt::format("give one (--set {}=VALUE), or leave the flag out to keep the config's value", path));
  }
  Json value = load_yaml(text, "--set " + flag).value;
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
  (*node)[keys.back()] = std::move(value);
  source.set_by_override(path, flag);
}

void fill_defaults(Json& config) {
  for (const auto& [path, spec] : config_schema()) {
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
    if (spec.type == ConfigType::kStringOrObject && value.is_object() && !value.contains("name")) {
      value["name"] = spec.fallback;
    }
  }
}

}  // namespace

nlohmann::json parse_config(const std::string& yaml_text, const std::string& source_name,
                            const std::vector<std::string>& overrides) {
  ConfigSource source(source_name);
  YamlDocument document = load_yaml(yaml_text, source_name);
  Json config = document.value.is_null() ? Json::object() : std::move(document.value);
  source.set_lines(std::move(document.lines));
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
  if (is_pipeline_split(config["data"]["train"])) {
    check_pipeline_split(config["data"]["train"], "data.train",
                         [&](const std::string& path) { return source.where(path); });
    resolve_validation_split(config["data"], [&](const std::string& path) { return source.where(path); });
  }
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
  validate_config(config, source);
  return config;
}

nlohmann::json load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw NotFound(fmt::format("{}: cannot open the config", path));
  // Reads at most one byte past the loader's limit, so that a huge file is refused without being read.
  const size_t limit = YamlLimits{}.max_bytes;
  std::string text(limit + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return parse_config(text, path, overrides);
}

}  // namespace nimbus::train
