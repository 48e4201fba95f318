#include "config_validation.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "closest_name.h"
#include "nimbus/base/error.h"
#include "nimbus/nn/layers.h"
#include "nimbus/train/from_config.h"
#include "nimbus/train/metrics.h"

namespace nimbus::train {

namespace {

using Json = nlohmann::json;

// A NaN or an infinity anywhere (YAML's .nan and .inf read as numbers, and train to NaN).
void check_finite(const Json& value, const std::string& path, const ConfigSource& source) {
  if (value.is_number_float() && !std::isfinite(value.get<double>())) {
    throw InvalidArgument(fmt::format("{}: {} is {}", source.where(path), path, as_written(value)),
                          "give a finite number");
  }
  if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) check_finite(value[i], fmt::format("{}[{}]", path, i), source);
  } else if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      check_finite(child, path.empty() ? key : fmt::format("{}.{}", path, key), source);
    }
  }
}

// section.key, an integer (or a word such as auto, which passes), at least `minimum`.
void require_at_least(const Json& section, const std::string& path, int64_t minimum, const ConfigSource& source,
                      const std::string& hint) {
  const std::string key = path.substr(path.rfind('.') + 1);
  if (!section.contains(key) || !section[key].is_number_integer()) return;
  const int64_t value = section[key].get<int64_t>();
  if (value < minimum) {
    throw InvalidArgument(fmt::format("{}: {} is {}; it must be at least {}", source.where(path), path, value, minimum),
                          hint);
  }
}

void check_fit(const Json& fit, const ConfigSource& source) {
  require_at_least(fit, "fit.epochs", 1, source, "the number of epochs to train, 1 or more");
  require_at_least(fit, "fit.initial_epoch", 0, source, "the epoch to start from, counted from 0");
  if (fit.at("initial_epoch").get<int64_t>() >= fit.at("epochs").get<int64_t>()) {
    throw InvalidArgument(fmt::format("{}: fit.initial_epoch ({}) leaves no epoch to train: fit.epochs is {}",
                                      source.where("fit.initial_epoch"), fit["initial_epoch"].get<int64_t>(),
                                      fit["epochs"].get<int64_t>()),
                          "fit.epochs counts from epoch 0 (as Keras's): make it larger than fit.initial_epoch");
  }
  require_at_least(fit, "fit.steps_per_epoch", 1, source,
                   "leave fit.steps_per_epoch out for a whole pass over the data each epoch");
  require_at_least(fit, "fit.batch_size", 1, source, "give fit.batch_size 1 or more (or auto)");
  require_at_least(fit, "fit.gradient_accumulation", 1, source,
                   "give fit.gradient_accumulation 1 (no accumulation), more, or auto");
  require_at_least(fit, "fit.verbose", 0, source, "0 (quiet), 1 (a progress bar) or 2 (a line per epoch)");
  if (fit.at("verbose").get<int64_t>() > 2) {
    throw InvalidArgument(fmt::format("{}: fit.verbose is {}; it must be 0, 1 or 2", source.where("fit.verbose"),
                                      fit["verbose"].get<int64_t>()),
                          "0 (quiet), 1 (a progress bar) or 2 (a line per epoch)");
  }
  const Json& batch = fit.at("batch_size");
  const Json& accumulation = fit.at("gradient_accumulation");
  if (batch.is_number_integer() && accumulation.is_number_integer() &&
      batch.get<int64_t>() % accumulation.get<int64_t>() != 0) {
    const int64_t b = batch.get<int64_t>(), a = accumulation.get<int64_t>();
    throw InvalidArgument(
        fmt::format("{}: fit.gradient_accumulation {} does not divide fit.batch_size {} into equal micro-batches",
                    source.where("fit.gradient_accumulation"), a, b),
        fmt::format("make fit.batch_size a multiple of {} (e.g. {}), or set fit.gradient_accumulation: auto", a,
                    std::max(a, b / a * a)));
  }
}

void check_runtime(const Json& runtime, const ConfigSource& source) {
  require_at_least(runtime, "runtime.threads", 0, source, "0 (one per core) or a number of threads");
  if (runtime.contains("memory") && runtime["memory"].contains("fraction")) {
    const double fraction = runtime["memory"]["fraction"].get<double>();
    if (!(fraction > 0 && fraction <= 1)) {
      throw InvalidArgument(fmt::format("{}: runtime.memory.fraction is {}; it must be in (0, 1]",
                                        source.where("runtime.memory.fraction"), fraction),
                            "the share of the device's memory to use, e.g. 0.9");
    }
  }
  if (runtime.contains("strategy") && runtime["strategy"].contains("collective_timeout")) {
    const double seconds = runtime["strategy"]["collective_timeout"].get<double>();
    if (!(seconds > 0)) {
      throw InvalidArgument(fmt::format("{}: runtime.strategy.collective_timeout is {}; it must be positive",
                                        source.where("runtime.strategy.collective_timeout"), seconds),
                            "seconds a collective may wait for the other workers, e.g. 600");
    }
  }
}

// Runs `make` (an optimizer or loss from `spec` at `path`); its refusal names where it was written
// and, when the message names one of the spec's arguments, that argument's line.
template <typename Make>
void check_made(const Json& spec, const std::string& path, const ConfigSource& source, Make make) {
  try {
    make(spec);
  } catch (const Error& error) {
    std::string at = path;
    if (spec.is_object()) {
      for (const auto& [key, value] : spec.items()) {
        if (error.message().find("'" + key + "'") != std::string::npos ||
            error.message().find(" " + key + " ") != std::string::npos) {
          at = fmt::format("{}.{}", path, key);
        }
      }
    }
    throw InvalidArgument(fmt::format("{}: {}: {}", source.where(at), at, error.message()), error.hint());
  }
}

void check_compile(const Json& compile, const ConfigSource& source) {
  check_made(compile.at("optimizer"), "compile.optimizer", source,
             [](const Json& spec) { (void)optimizer_from_config(spec); });
  check_made(compile.at("loss"), "compile.loss", source, [](const Json& spec) { (void)loss_from_config(spec); });
  const Loss loss = loss_from_config(compile.at("loss"));
  const Json& metrics = compile.at("metrics");
  for (size_t i = 0; i < metrics.size(); ++i) {
    check_made(metrics[i], fmt::format("compile.metrics[{}]", i), source,
               [&](const Json& name) { (void)get_metric(name.get<std::string>(), loss); });
  }
}

// The layer list's entries ({ClassName: {arguments}}): each made from its arguments (which must be the
// layer's), every size positive, and no two with one name (checkpoints key weights by layer name).
void check_layers(const Json& model, const ConfigSource& source) {
  const auto& input_shape = model.at("input_shape");
  for (size_t i = 0; i < input_shape.size(); ++i) {
    if (input_shape[i].get<int64_t>() < 1) {
      throw InvalidArgument(fmt::format("{}: model.input_shape {} has a size below 1",
                                        source.where("model.input_shape"), input_shape.dump()),
                            "give the size of each axis of one sample, without the batch axis, e.g. [28, 28, 1]");
    }
  }
  const Json& layers = model.at("layers");
  if (layers.empty()) {
    throw InvalidArgument(fmt::format("{}: model.layers is empty", source.where("model.layers")),
                          "list the model's layers, e.g. - Dense: {units: 10}");
  }
  std::map<std::string, size_t> named;  // explicit names, with the first layer that took each
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
    const std::string arguments_path = fmt::format("{}.{}", path, class_name);
    if (!arguments.is_object()) {
      throw InvalidArgument(fmt::format("{}: layer {} ({}): its arguments must be a mapping, got {}",
                                        source.where(arguments_path), i, class_name, arguments.dump()),
                            fmt::format("e.g. - {}: {{name: my_layer}}", class_name));
    }
    nn::Layer layer;
    try {
      layer = nn::layer_from_config(class_name, arguments);
    } catch (const Error& error) {
      throw InvalidArgument(
          fmt::format("{}: layer {} ({}): {}", source.where(arguments_path), i, class_name, error.message()),
          error.hint());
    }
    const Json known = layer->get_config();
    for (const auto& [key, value] : arguments.items()) {
      // inbound: the functional form (nn::model_from_layer_list); dtype_policy: any layer's (layer_from_config).
      if (!known.contains(key) && key != "inbound" && key != "dtype_policy") {
        std::vector<std::string> names;
        for (const auto& [name, v] : known.items()) names.push_back(name);
        throw InvalidArgument(fmt::format("{}: layer {} ({}) has no argument '{}'",
                                          source.where(fmt::format("{}.{}", arguments_path, key)), i, class_name, key),
                              fmt::format("did you mean '{}'?", closest_name(key, names)));
      }
    }
    if (arguments.contains("name") && arguments["name"].is_string()) {
      const auto [first, inserted] = named.emplace(arguments["name"].get<std::string>(), i);
      if (!inserted) {
        throw InvalidArgument(fmt::format("{}: layers {} and {} are both named '{}'",
                                          source.where(arguments_path + ".name"), first->second, i, first->first),
                              "give each layer a distinct name: checkpoints keep weights by layer name");
      }
    }
  }
}

}  // namespace

std::string as_written(const nlohmann::json& value) {
  if (value.is_number_float() && !std::isfinite(value.get<double>())) {
    const double number = value.get<double>();
    return std::isnan(number) ? ".nan" : number > 0 ? ".inf" : "-.inf";
  }
  return value.dump();
}

void validate_config(const nlohmann::json& config, const ConfigSource& source) {
  check_finite(config, "", source);
  check_fit(config.at("fit"), source);
  check_runtime(config.at("runtime"), source);
  require_at_least(config.at("checkpoint"), "checkpoint.max_to_keep", 0, source,
                   "the number of checkpoints to keep; 0 keeps every one");
  check_compile(config.at("compile"), source);
  const Json& model = config.at("model");
  if (model.contains("class_name")) return;  // Keras's to_json form: model_from_config checks it as it builds
  if (!model.contains("layers") || !model.contains("input_shape")) {
    throw InvalidArgument(fmt::format("{}: the model needs input_shape and layers", source.where("model")),
                          "or Keras's to_json() form with class_name and config");
  }
  check_layers(model, source);
}

}  // namespace nimbus::train
