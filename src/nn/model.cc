#include "nimbus/nn/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "nimbus/base/error.h"
#include "nimbus/nn/layers.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/tensor/safetensors.h"

namespace nimbus::nn {

// Defined in layers.cc: an InputLayer's declared shape and dtype.
std::optional<std::pair<Dims, DType>> input_layer_spec(const LayerImpl& layer);

struct Model::State {
  std::string name;
  bool sequential = false;
  std::vector<KerasTensor> inputs, outputs;
  // Nodes in execution order (input nodes included) and the distinct layers, in the same order.
  std::vector<std::shared_ptr<KerasTensor::Node>> nodes;
  std::vector<Layer> layers;
  // Sequential: the stacked layers (without an InputLayer).
  std::vector<Layer> stack;

  void set_graph(std::vector<KerasTensor> new_inputs, std::vector<KerasTensor> new_outputs) {
    inputs = std::move(new_inputs);
    outputs = std::move(new_outputs);
    nodes.clear();
    layers.clear();
    // Depth-first post-order from the outputs: every node after its inputs.
    std::unordered_set<const KerasTensor::Node*> done;
    std::function<void(const std::shared_ptr<KerasTensor::Node>&)> visit = [&](const auto& node) {
      if (done.count(node.get())) return;
      for (const KerasTensor& input : node->inputs) visit(input.node());
      done.insert(node.get());
      nodes.push_back(node);
    };
    for (const KerasTensor& input : inputs) visit(input.node());
    for (const KerasTensor& output : outputs) visit(output.node());
    std::unordered_set<const LayerImpl*> seen;
    for (const auto& node : nodes) {
      if (sequential && node->inputs.empty()) continue;
      if (seen.insert(node->layer.get()).second) layers.emplace_back(node->layer);
    }
    for (const auto& node : nodes) {
      const bool is_input =
          std::any_of(inputs.begin(), inputs.end(), [&](const KerasTensor& t) { return t.node() == node; });
      if (node->inputs.empty() && !is_input) {
        throw InvalidArgument(fmt::format("model '{}': the outputs depend on input '{}', which is not among its inputs",
                                          name, node->layer->name()),
                              "pass every Input() the outputs use to the Model");
      }
    }
  }

  bool built() const { return !outputs.empty(); }

  // Sequential: applies the stack to `input`, layer by layer.
  void build_sequential(const KerasTensor& input) {
    KerasTensor x = input;
    for (size_t i = 0; i < stack.size(); ++i) x = apply_symbolic(stack[i].impl(), {x}, static_cast<int>(i));
    set_graph({input}, {x});
  }
};

Model::Model(std::shared_ptr<State> state) : state_(std::move(state)) {}

Model::Model(const std::vector<KerasTensor>& inputs, const std::vector<KerasTensor>& outputs, const std::string& name)
    : state_(std::make_shared<State>()) {
  state_->name = name.empty() ? unique_layer_name("functional") : name;
  if (inputs.empty() || outputs.empty()) throw InvalidArgument("Model: needs at least one input and one output");
  for (const KerasTensor& input : inputs) {
    if (!input.defined() || !input.node()->inputs.empty()) {
      throw InvalidArgument(fmt::format("model '{}': every input must come from nn::Input()", state_->name));
    }
  }
  state_->set_graph(inputs, outputs);
}

std::vector<Tensor> Model::operator()(const std::vector<Tensor>& inputs, bool training) const {
  State& state = *state_;
  if (!state.built()) {
    NIMBUS_ASSERT(state.sequential) << "functional models are built at construction";
    if (inputs.size() != 1 || inputs[0].rank() < 1) {
      throw InvalidArgument(fmt::format("Sequential '{}': takes one input with a batch dimension", state.name));
    }
    const Dims sample(inputs[0].shape().begin() + 1, inputs[0].shape().end());
    state.build_sequential(Input(sample, inputs[0].dtype()));
  }
  if (inputs.size() != state.inputs.size()) {
    throw InvalidArgument(
        fmt::format("model '{}': takes {} input(s), got {}", state.name, state.inputs.size(), inputs.size()));
  }
  std::unordered_map<const KerasTensor::Node*, std::vector<Tensor>> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Dims& expected = state.inputs[i].shape();
    const Shape& got = inputs[i].shape();
    bool match = got.rank() == static_cast<int>(expected.size());
    for (int d = 1; match && d < got.rank(); ++d) match = expected[d] < 0 || expected[d] == got[d];
    if (!match) {
      throw InvalidArgument(fmt::format("model '{}': input {} has shape {}, the model expects {}", state.name, i,
                                        got.to_string(), format_dims(expected)));
    }
    values[state.inputs[i].node().get()] = {inputs[i]};
  }
  for (const auto& node : state.nodes) {
    if (node->inputs.empty()) continue;
    std::vector<Tensor> args;
    for (const KerasTensor& input : node->inputs) {
      args.push_back(values.at(input.node().get())[static_cast<size_t>(input.output_index())]);
    }
    values[node.get()] = node->layer->call_with_policy(args, training);
  }
  std::vector<Tensor> results;
  for (const KerasTensor& output : state.outputs) {
    Tensor result = values.at(output.node().get())[static_cast<size_t>(output.output_index())];
    // Mixed precision: the last layers' outputs (and so the loss) are f32.
    const DType dtype = result.dtype();
    if (output.node()->layer->dtype_policy.is_mixed() && (dtype == DType::kF16 || dtype == DType::kBF16)) {
      result = cast(result, DType::kF32);
    }
    results.push_back(std::move(result));
  }
  return results;
}

Tensor Model::operator()(const Tensor& input, bool training) const {
  std::vector<Tensor> outputs = (*this)(std::vector<Tensor>{input}, training);
  if (outputs.size() != 1) {
    throw InvalidArgument(fmt::format("model '{}' has {} outputs: call it with a vector", name(), outputs.size()));
  }
  return outputs[0];
}

const std::string& Model::name() const { return state_->name; }

std::vector<Layer> Model::layers() const { return state_->built() ? state_->layers : state_->stack; }

Layer Model::get_layer(const std::string& layer_name) const {
  std::string names;
  for (const Layer& layer : layers()) {
    if (layer.name() == layer_name) return layer;
    names += (names.empty() ? "" : ", ") + layer.name();
  }
  throw NotFound(fmt::format("model '{}' has no layer '{}' (it has {})", name(), layer_name, names));
}

bool Model::built() const { return state_->built(); }

std::vector<Variable> Model::weights() const {
  std::vector<Variable> result;
  for (const Layer& layer : layers()) {
    for (const Variable& v : layer->weights()) result.push_back(v);
  }
  return result;
}

std::vector<Variable> Model::trainable_weights() const {
  std::vector<Variable> result;
  for (const Layer& layer : layers()) {
    for (const Variable& v : layer->trainable_weights()) result.push_back(v);
  }
  return result;
}

std::vector<Variable> Model::non_trainable_weights() const {
  std::vector<Variable> result;
  for (const Layer& layer : layers()) {
    for (const Variable& v : layer->non_trainable_weights()) result.push_back(v);
  }
  return result;
}

int64_t Model::count_params() const {
  int64_t total = 0;
  for (const Layer& layer : layers()) total += layer->count_params();
  return total;
}

Tensor Model::regularization_loss() const {
  Tensor total;
  for (const Layer& layer : layers()) {
    Tensor penalty = layer->regularization_loss();
    if (penalty.defined()) total = total.defined() ? total + penalty : penalty;
  }
  return total;
}

std::vector<KerasTensor> Model::inputs() const { return state_->inputs; }
std::vector<KerasTensor> Model::outputs() const { return state_->outputs; }

namespace {

// Keras's readable_memory_size: powers of 1024, two decimals.
std::string readable_size(double bytes) {
  const char* units[] = {"Byte", "KB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return fmt::format("{:.2f} {}", bytes, units[unit]);
}

int64_t weight_bytes(const std::vector<Variable>& weights) {
  int64_t total = 0;
  for (const Variable& v : weights) total += static_cast<int64_t>(v.value().nbytes());
  return total;
}

int64_t weight_count(const std::vector<Variable>& weights) {
  int64_t total = 0;
  for (const Variable& v : weights) total += v.shape().numel();
  return total;
}

// One table row as Keras prints it: the first cell after one space, each cell cut to leave two spaces
// before the next column, and padded to its column's end.
std::string table_row(const std::vector<std::string>& cells, const std::vector<size_t>& ends) {
  std::string line;
  size_t start = 0;
  for (size_t i = 0; i < cells.size(); ++i) {
    const size_t space = i + 1 < ends.size() ? 2 : 0;
    if (i == 0) line += " ";
    line += cells[i].substr(0, ends[i] - start - space);
    if (line.size() < ends[i]) line += std::string(ends[i] - line.size(), ' ');
    start = ends[i];
  }
  return line + "\n";
}

}  // namespace

std::string Model::summary_string() const {
  const State& state = *state_;
  const bool connected_column = !state.sequential;
  const size_t width = connected_column ? 98 : 65;
  const std::vector<size_t> ends =
      connected_column ? std::vector<size_t>{32, 53, 65, 98} : std::vector<size_t>{29, 55, 65};
  std::string out = fmt::format("Model: \"{}\"\n", state.name);
  out += std::string(width, '_') + "\n";
  std::vector<std::string> header = {"Layer (type)", "Output Shape", "Param #"};
  if (connected_column) header.push_back("Connected to");
  out += table_row(header, ends);
  out += std::string(width, '=') + "\n";
  if (!state.built()) {
    for (const Layer& layer : state.stack) {
      out += table_row({fmt::format("{} ({})", layer.name(), layer->class_name()), "(unbuilt)",
                        layer->built() ? std::to_string(layer->count_params()) : "0"},
                       ends);
    }
  }
  for (const auto& node : state.nodes) {
    if (state.sequential && node->inputs.empty()) continue;
    std::string shapes;
    for (const Dims& dims : node->output_shapes) shapes += (shapes.empty() ? "" : ", ") + format_dims(dims);
    std::vector<std::string> cells = {fmt::format("{} ({})", node->layer->name(), node->layer->class_name()), shapes,
                                      std::to_string(node->layer->count_params())};
    std::vector<std::string> connections;
    for (const KerasTensor& input : node->inputs) {
      connections.push_back(fmt::format("{}[0][{}]", input.node()->layer->name(), input.output_index()));
    }
    if (connected_column) cells.push_back(connections.empty() ? "[]" : connections[0]);
    out += table_row(cells, ends);
    for (size_t i = 1; connected_column && i < connections.size(); ++i) {
      out += table_row({"", "", "", connections[i]}, ends);
    }
    out += std::string(width, ' ') + "\n";
  }
  const std::vector<Variable> all = weights(), trainable = trainable_weights(), frozen = non_trainable_weights();
  out += std::string(width, '=') + "\n";
  out += fmt::format("Total params: {} ({})\n", weight_count(all), readable_size(double(weight_bytes(all))));
  out += fmt::format("Trainable params: {} ({})\n", weight_count(trainable),
                     readable_size(double(weight_bytes(trainable))));
  out +=
      fmt::format("Non-trainable params: {} ({})\n", weight_count(frozen), readable_size(double(weight_bytes(frozen))));
  out += std::string(width, '_') + "\n";
  return out;
}

void Model::summary() const { std::cout << summary_string() << std::flush; }

// ---- serialization ----

namespace {
// A layer's entry with what Keras keeps beside its arguments, where it differs from the default: a
// frozen layer and a mixed-precision policy (layer_from_config reads both back).
nlohmann::json layer_entry(const LayerImpl& layer) {
  nlohmann::json config = layer.get_config();
  if (!layer.trainable) config["trainable"] = false;
  if (layer.dtype_policy.is_mixed()) config["dtype_policy"] = layer.dtype_policy.name;
  return {{"class_name", layer.class_name()}, {"config", config}};
}
}  // namespace

nlohmann::json Model::to_config() const {
  const State& state = *state_;
  nlohmann::json layers = nlohmann::json::array();
  if (state.sequential) {
    if (state.built()) layers.push_back(layer_entry(*state.inputs[0].node()->layer));
    for (const Layer& layer : state.built() ? state.layers : state.stack) layers.push_back(layer_entry(*layer));
    return {{"class_name", "Sequential"}, {"config", {{"name", state.name}, {"layers", layers}}}};
  }
  // Functional: every call of a layer is one of its nodes; references are [layer, node index, tensor index, {}].
  std::unordered_map<const KerasTensor::Node*, int> node_index;
  std::unordered_map<const LayerImpl*, size_t> entry_of;
  for (const auto& node : state.nodes) {
    const LayerImpl* layer = node->layer.get();
    if (!entry_of.count(layer)) {
      entry_of[layer] = layers.size();
      nlohmann::json entry = layer_entry(*layer);
      entry["name"] = layer->name();
      entry["inbound_nodes"] = nlohmann::json::array();
      layers.push_back(entry);
    }
    nlohmann::json& entry = layers[entry_of[layer]];
    node_index[node.get()] = static_cast<int>(entry["inbound_nodes"].size());
    nlohmann::json inbound = nlohmann::json::array();
    for (const KerasTensor& input : node->inputs) {
      inbound.push_back({input.node()->layer->name(), node_index.at(input.node().get()), input.output_index(),
                         nlohmann::json::object()});
    }
    // An InputLayer's node has no inbound tensors; Keras writes an empty list for it.
    entry["inbound_nodes"].push_back(inbound);
  }
  auto references = [&](const std::vector<KerasTensor>& tensors) {
    nlohmann::json list = nlohmann::json::array();
    for (const KerasTensor& t : tensors) {
      list.push_back({t.node()->layer->name(), node_index.at(t.node().get()), t.output_index()});
    }
    return list;
  };
  for (auto& entry : layers) {
    if (entry["class_name"] == "InputLayer") entry["inbound_nodes"] = nlohmann::json::array();
  }
  return {{"class_name", "Functional"},
          {"config",
           {{"name", state.name},
            {"layers", layers},
            {"input_layers", references(state.inputs)},
            {"output_layers", references(state.outputs)}}}};
}

namespace {

// A layer call's tensor arguments in a Keras JSON node, as [layer name, node index, tensor index]
// references: positional ones in order, keyword ones by name.
struct NodeArguments {
  std::vector<nlohmann::json> positional;
  std::map<std::string, nlohmann::json> named;
};

// Keras 3 writes a tensor as {"class_name": "__keras_tensor__", "config": {"keras_history": [...]}}.
bool is_keras3_tensor(const nlohmann::json& value) {
  return value.is_object() && value.value("class_name", "") == "__keras_tensor__";
}
// Keras 2 writes one as [layer name, node index, tensor index] (with a kwargs mapping as a 4th item in a node).
bool is_keras2_reference(const nlohmann::json& value) {
  return value.is_array() && value.size() >= 3 && value[0].is_string() && value[1].is_number_integer() &&
         value[2].is_number_integer();
}

NodeArguments node_arguments(const nlohmann::json& node) {
  NodeArguments arguments;
  if (node.is_object()) {  // Keras 3: {"args": [...], "kwargs": {...}}; Add's inputs come as one list argument
    std::function<void(const nlohmann::json&)> collect = [&](const nlohmann::json& value) {
      if (is_keras3_tensor(value)) return arguments.positional.push_back(value.at("config").at("keras_history"));
      if (value.is_array()) {
        for (const auto& item : value) collect(item);
      }
    };
    const nlohmann::json args = node.value("args", nlohmann::json::array());
    const nlohmann::json kwargs = node.value("kwargs", nlohmann::json::object());
    for (const auto& argument : args) collect(argument);
    for (const auto& [key, value] : kwargs.items()) {
      if (is_keras3_tensor(value)) arguments.named[key] = value.at("config").at("keras_history");
    }
    return arguments;
  }
  // Keras 2: a list of references, each with an optional kwargs mapping whose tensors are references too
  // (MultiHeadAttention called as mha(x, value=y) writes [["x", 0, 0, {"value": ["y", 0, 0]}]]).
  for (const auto& reference : node) {
    arguments.positional.push_back(reference);
    if (reference.size() > 3 && reference[3].is_object()) {
      for (const auto& [key, value] : reference[3].items()) {
        if (is_keras2_reference(value)) arguments.named[key] = value;
      }
    }
  }
  return arguments;
}

// Keras passes use_causal_mask when it calls MultiHeadAttention ({"use_causal_mask": true} among a
// node's kwargs); Nimbus's layer takes it as an option, so the layer's config gets it from its calls.
nlohmann::json with_causal_mask_from_calls(nlohmann::json layer_config, const nlohmann::json& nodes) {
  std::set<bool> causal;
  for (const auto& node : nodes) {
    bool asked = false;
    if (node.is_object()) {
      asked = node.value("kwargs", nlohmann::json::object()).value("use_causal_mask", false);
    } else {
      for (const auto& reference : node) {
        if (reference.size() > 3 && reference[3].is_object()) asked = reference[3].value("use_causal_mask", false);
      }
    }
    causal.insert(asked);
  }
  if (causal.size() > 1) {
    throw Unimplemented(
        fmt::format("layer '{}' is called both with and without use_causal_mask", layer_config.value("name", "")),
        "use two MultiHeadAttention layers");
  }
  if (causal.count(true)) layer_config["use_causal_mask"] = true;
  return layer_config;
}

// Puts keyword tensors where the layer's call() takes them (by input_names()); a gap before a later
// argument (a mask without a key) takes the value, which is what Keras uses for a missing key.
void place_named_inputs(const LayerImpl& layer, const std::map<std::string, KerasTensor>& named,
                        std::vector<KerasTensor>& inputs) {
  if (named.empty()) return;
  const std::vector<std::string> names = layer.input_names();
  for (const auto& [key, tensor] : named) {
    const auto it = std::find(names.begin(), names.end(), key);
    if (it == names.end()) {
      throw InvalidArgument(
          fmt::format("layer '{}' ({}) takes no tensor argument '{}'", layer.name(), layer.class_name(), key));
    }
    const auto index = static_cast<size_t>(it - names.begin());
    if (inputs.size() <= index) inputs.resize(index + 1);
    inputs[index] = tensor;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined()) continue;
    if (i == 2 && inputs.size() > 1 && inputs[1].defined()) {
      inputs[i] = inputs[1];
    } else {
      throw InvalidArgument(fmt::format("layer '{}' ({}): no tensor for its argument '{}'", layer.name(),
                                        layer.class_name(), i < names.size() ? names[i] : std::to_string(i)));
    }
  }
}

}  // namespace

Model model_from_config(const nlohmann::json& json) {
  try {
    const std::string class_name = json.at("class_name").get<std::string>();
    const nlohmann::json& config = json.at("config");
    const std::string name = config.value("name", "");
    if (class_name == "Sequential") {
      Sequential model({}, name);
      for (const auto& entry : config.at("layers")) {
        const nlohmann::json& layer_config = entry.at("config");
        // Older Keras 2 files declare the input on the first layer instead of an InputLayer.
        if (!model.built() && model.layers().empty() && layer_config.contains("batch_input_shape") &&
            entry.at("class_name") != "InputLayer") {
          model.add(
              layer_from_config("InputLayer", {{"batch_input_shape", layer_config["batch_input_shape"]},
                                               {"dtype", layer_config.value("dtype", nlohmann::json("float32"))}}));
        }
        model.add(layer_from_config(entry.at("class_name").get<std::string>(), layer_config));
      }
      return model;
    }
    if (class_name != "Functional" && class_name != "Model") {
      throw InvalidArgument(fmt::format("model class '{}' is neither Sequential nor Functional", class_name));
    }
    // Each layer's nodes are rebuilt once their inputs exist; passes repeat until nothing is left.
    struct Pending {
      Layer layer;
      nlohmann::json nodes;
      size_t next = 0;
    };
    std::vector<Pending> pending;
    std::unordered_map<std::string, std::vector<KerasTensor>> outputs;  // layer name -> one tensor per node
    for (const auto& entry : config.at("layers")) {
      const std::string layer_class = entry.at("class_name").get<std::string>();
      const nlohmann::json& layer_config = entry.at("config");
      if (layer_class == "InputLayer") {
        const Layer input = layer_from_config(layer_class, layer_config);
        const auto spec = input_layer_spec(*input);
        outputs[input.name()] = {Input(spec->first, spec->second, input.name())};
        continue;
      }
      const nlohmann::json& nodes = entry.at("inbound_nodes");
      pending.push_back({layer_from_config(layer_class, with_causal_mask_from_calls(layer_config, nodes)), nodes, 0});
    }
    auto resolve = [&](const nlohmann::json& reference) -> std::optional<KerasTensor> {
      const auto it = outputs.find(reference.at(0).get<std::string>());
      const auto index = reference.at(1).get<size_t>();
      if (it == outputs.end() || index >= it->second.size()) return std::nullopt;
      return it->second[index];
    };
    for (bool progress = true; progress;) {
      progress = false;
      for (Pending& p : pending) {
        while (p.next < p.nodes.size()) {
          const NodeArguments arguments = node_arguments(p.nodes[p.next]);
          std::vector<KerasTensor> inputs;
          bool ready = true;
          for (const auto& reference : arguments.positional) {
            const auto tensor = resolve(reference);
            if (!tensor) {
              ready = false;
              break;
            }
            inputs.push_back(*tensor);
          }
          std::map<std::string, KerasTensor> named;
          for (const auto& [key, reference] : arguments.named) {
            const auto tensor = resolve(reference);
            if (!tensor) {
              ready = false;
              break;
            }
            named[key] = *tensor;
          }
          if (!ready) break;
          place_named_inputs(*p.layer, named, inputs);
          outputs[p.layer.name()].push_back(inputs.size() == 1 ? p.layer(inputs[0]) : p.layer(inputs));
          ++p.next;
          progress = true;
        }
      }
    }
    for (const Pending& p : pending) {
      if (p.next < p.nodes.size()) {
        throw InvalidArgument(
            fmt::format("model '{}': the inputs of layer '{}' never become available", name, p.layer.name()));
      }
    }
    auto tensors = [&](const nlohmann::json& references) {
      std::vector<KerasTensor> list;
      for (const auto& reference : references) {
        const auto tensor = resolve(reference);
        if (!tensor) throw InvalidArgument(fmt::format("model '{}': unknown tensor {}", name, reference.dump()));
        list.push_back(*tensor);
      }
      return list;
    };
    return Model(tensors(config.at("input_layers")), tensors(config.at("output_layers")), name);
  } catch (const nlohmann::json::exception& error) {
    throw InvalidArgument(fmt::format("malformed model config: {}", error.what()));
  }
}

void Model::save(const std::string& path) const {
  if (!built()) {
    throw InvalidArgument(fmt::format("model '{}' is not built: its weights do not exist yet", name()),
                          "call it on data first, or start it with an InputLayer");
  }
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const Variable& variable : weights()) tensors.emplace_back(variable.name(), variable.value());
  write_safetensors(path, tensors, {{"format", "nimbus"}, {"nimbus.model", to_config().dump()}});
}

Model load_model(const std::string& path) {
  SafetensorsFile file = read_safetensors(path);
  const auto architecture = file.metadata.find("nimbus.model");
  if (architecture == file.metadata.end()) {
    throw DataError(fmt::format("{}: no model architecture in the metadata (key 'nimbus.model')", path),
                    "this file holds tensors only; build the model in code and load weights into it");
  }
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(architecture->second);
  } catch (const nlohmann::json::exception& error) {
    throw DataError(fmt::format("{}: malformed model architecture: {}", path, error.what()));
  }
  Model model = model_from_config(config);
  if (!model.built()) throw DataError(fmt::format("{}: the saved model has no input shape", path));
  for (const Variable& variable : model.weights()) {
    const auto it = file.tensors.find(variable.name());
    if (it == file.tensors.end()) throw DataError(fmt::format("{}: no weight '{}'", path, variable.name()));
    if (it->second.shape() != variable.shape() || it->second.dtype() != variable.dtype()) {
      throw DataError(fmt::format("{}: weight '{}' is {} {}, the model expects {} {}", path, variable.name(),
                                  dtype_name(it->second.dtype()), it->second.shape().to_string(),
                                  dtype_name(variable.dtype()), variable.shape().to_string()));
    }
    Variable target = variable;
    target.assign(it->second);
  }
  return model;
}

// ---- Sequential ----

Sequential::Sequential(const std::vector<Layer>& layers, const std::string& name) : Model(std::make_shared<State>()) {
  state_->name = name.empty() ? unique_layer_name("sequential") : name;
  state_->sequential = true;
  for (const Layer& layer : layers) add(layer);
}

void Sequential::add(const Layer& layer) {
  State& state = *state_;
  if (auto spec = input_layer_spec(*layer)) {
    if (state.built() || !state.stack.empty()) {
      throw InvalidArgument(fmt::format("Sequential '{}': an InputLayer can only come first", state.name));
    }
    auto node = Input(spec->first, spec->second, layer.name());
    state.set_graph({node}, {node});
    return;
  }
  // Checkpoints key weights by layer name: a repeated name is refused now, not when the first is saved.
  for (size_t i = 0; i < state.stack.size(); ++i) {
    if (state.stack[i].name() == layer.name()) {
      throw InvalidArgument(fmt::format("Sequential '{}': layer {} ({}) is named '{}', as layer {} is", state.name,
                                        state.stack.size(), layer->class_name(), layer.name(), i),
                            "give each layer a distinct name");
    }
  }
  state.stack.push_back(layer);
  if (state.built()) {
    const KerasTensor output =
        apply_symbolic(layer.impl(), {state.outputs[0]}, static_cast<int>(state.stack.size()) - 1);
    state.set_graph(state.inputs, {output});
  }
}

void Sequential::add(const KerasTensor& input) {
  if (!input.defined() || !input.node()->inputs.empty()) {
    throw InvalidArgument(fmt::format("Sequential '{}': add() takes layers, or an nn::Input() first", name()));
  }
  if (built() || !state_->stack.empty()) {
    throw InvalidArgument(fmt::format("Sequential '{}': an Input can only come first", name()));
  }
  state_->set_graph({input}, {input});
}

void Sequential::build(const Dims& input_shape, DType dtype) { state_->build_sequential(Input(input_shape, dtype)); }

}  // namespace nimbus::nn
