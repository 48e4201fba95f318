// Models from a config's layer list: a Sequential, or, when entries name
// their inbound layers, a functional graph.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "nimbus/base/error.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"

namespace nimbus::nn {

namespace {

constexpr const char* kInputName = "input";

// {ClassName: {arguments}} -> (class name, arguments without "inbound", inbound names or none).
struct Entry {
  std::string class_name;
  nlohmann::json arguments;
  std::optional<std::vector<std::string>> inbound;
};

Entry parse_entry(const nlohmann::json& entry, size_t index) {
  if (!entry.is_object() || entry.size() != 1) {
    throw InvalidArgument(
        fmt::format("model.layers[{}]: expected one 'ClassName: {{arguments}}' entry, got {}", index, entry.dump()),
        "e.g. - Dense: {units: 10}");
  }
  Entry parsed{entry.begin().key(), entry.begin().value().is_null() ? nlohmann::json::object() : entry.begin().value(),
               std::nullopt};
  if (parsed.arguments.contains("inbound")) {
    const nlohmann::json& inbound = parsed.arguments["inbound"];
    const bool names = inbound.is_array() && !inbound.empty() &&
                       std::all_of(inbound.begin(), inbound.end(), [](const auto& v) { return v.is_string(); });
    if (!names && !inbound.is_string()) {
      throw InvalidArgument(fmt::format("model.layers[{}] ({}): inbound must be a layer name or a list of them, got {}",
                                        index, parsed.class_name, inbound.dump()));
    }
    parsed.inbound = inbound.is_string() ? std::vector<std::string>{inbound.get<std::string>()}
                                         : inbound.get<std::vector<std::string>>();
    parsed.arguments.erase("inbound");
  }
  return parsed;
}

}  // namespace

Model model_from_layer_list(const Dims& input_shape, DType input_dtype, const nlohmann::json& layers,
                            const std::string& name) {
  std::vector<Entry> entries;
  for (size_t i = 0; i < layers.size(); ++i) entries.push_back(parse_entry(layers[i], i));
  const bool functional = std::any_of(entries.begin(), entries.end(), [](const Entry& e) { return e.inbound; });
  if (!functional) {
    Sequential sequential({}, name);
    sequential.add(Input(input_shape, input_dtype));
    for (const Entry& entry : entries) sequential.add(layer_from_config(entry.class_name, entry.arguments));
    return sequential;
  }
  const KerasTensor input = Input(input_shape, input_dtype, kInputName);
  std::map<std::string, KerasTensor> outputs = {{kInputName, input}};
  KerasTensor previous = input;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& entry = entries[i];
    const Layer layer = layer_from_config(entry.class_name, entry.arguments);
    if (outputs.count(layer.name())) {
      throw InvalidArgument(fmt::format("model.layers[{}] ({}): the name '{}' is taken by an earlier layer", i,
                                        entry.class_name, layer.name()),
                            "give each layer a distinct name");
    }
    std::vector<KerasTensor> inputs = {previous};
    if (entry.inbound) {
      inputs.clear();
      for (const std::string& inbound : *entry.inbound) {
        const auto it = outputs.find(inbound);
        if (it == outputs.end()) {
          std::string known;
          for (const auto& [known_name, tensor] : outputs) known += (known.empty() ? "" : ", ") + known_name;
          throw InvalidArgument(fmt::format("model.layers[{}] ({} '{}'): inbound '{}' names no earlier layer", i,
                                            entry.class_name, layer.name(), inbound),
                                fmt::format("earlier layers: {}", known));
        }
        inputs.push_back(it->second);
      }
    }
    previous = apply_symbolic(layer.impl(), inputs, static_cast<int>(i));
    outputs[layer.name()] = previous;
  }
  return Model({input}, {previous}, name);
}

}  // namespace nimbus::nn
