// Models: a graph of layers from inputs to outputs (Keras's functional API),
// or a stack of layers (Sequential).
//
//   nn::Sequential mlp({nn::InputLayer({784}), nn::Dense(256, {.activation = "relu"}), nn::Dense(10)});
//   Tensor logits = mlp(x);               // eager, or traced inside nimbus::function
//   mlp.summary();                        // Keras's table
//
//   nn::KerasTensor in = nn::Input({28, 28, 1});
//   nn::KerasTensor h = nn::Conv2D(16, {3, 3}, {.padding = "same", .activation = "relu"})(in);
//   nn::KerasTensor skip = nn::Conv2D(16, {3, 3}, {.padding = "same"})(h);
//   nn::KerasTensor out = nn::Dense(10)(nn::GlobalAveragePooling2D()(nn::Add()({h, skip})));
//   nn::Model residual({in}, {out});
//
// A Sequential without an InputLayer builds when it first sees data (as in
// Keras); with one, each add() builds its layer at once, so argument errors
// surface there, naming the layer and its index in model.layers().
//
// Training (compile, fit, evaluate, predict) lives in nimbus/train/trainer.h.
#pragma once

#include <iosfwd>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nimbus/nn/layer.h"

namespace nimbus::nn {

class Model {
 public:
  // A functional model from symbolic inputs to outputs.
  Model(const std::vector<KerasTensor>& inputs, const std::vector<KerasTensor>& outputs, const std::string& name = "");

  // The forward pass; `training` switches Dropout and BatchNormalization.
  Tensor operator()(const Tensor& input, bool training = false) const;
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs, bool training = false) const;

  const std::string& name() const;
  // Layers in the order they run (InputLayers first for functional models, none for Sequential).
  std::vector<Layer> layers() const;
  // The layer with this name (NotFound lists the names).
  Layer get_layer(const std::string& name) const;
  bool built() const;

  std::vector<Variable> weights() const;
  std::vector<Variable> trainable_weights() const;
  std::vector<Variable> non_trainable_weights() const;
  int64_t count_params() const;
  // Sum of every layer's regularization penalties; undefined when there are none.
  Tensor regularization_loss() const;

  // Symbolic inputs and outputs (empty before a lazily built Sequential sees data).
  std::vector<KerasTensor> inputs() const;
  std::vector<KerasTensor> outputs() const;

  // Keras's to_json() form: {"class_name": "Sequential" or "Functional", "config": {"name", "layers", ...}}
  // (functional models list each layer's "inbound_nodes" and the model's "input_layers" and "output_layers").
  nlohmann::json to_config() const;
  // Keras's model.save: one safetensors file holding every weight (by variable name, "dense/kernel")
  // and, in its metadata, the architecture (key "nimbus.model", to_config() as JSON text). Written
  // atomically. load_model(path) rebuilds the model and loads the weights.
  void save(const std::string& path) const;

  // Keras's summary table; `line_length` as in Keras (65 for Sequential, 98 with a "Connected to" column).
  std::string summary_string() const;
  void summary() const;  // prints summary_string() to stdout

 protected:
  struct State;
  explicit Model(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

// A model from Model::to_config()'s form (also Keras's to_json() output for the layers Nimbus has).
Model model_from_config(const nlohmann::json& config);
// The model saved by Model::save, with its weights.
Model load_model(const std::string& path);

// The model of a config's layer list (`nimbus train`'s model.layers): entries {ClassName: {arguments}},
// each applied to the previous entry's output, or, when it has `inbound: [names]`, to the outputs of
// those earlier layers ("input" is the model's input; two or more names for Add, Concatenate and
// MultiHeadAttention's query, value, ...). The last entry is the output. Without any `inbound` this is
// a Sequential; with one it is a functional model, so residual and attention blocks can be written:
//
//   - Conv2D: {name: c1, filters: 16, kernel_size: 3, padding: same, activation: relu}
//   - Conv2D: {name: c2, filters: 16, kernel_size: 3, padding: same}
//   - Add: {inbound: [c1, c2]}
Model model_from_layer_list(const Dims& input_shape, DType input_dtype, const nlohmann::json& layers,
                            const std::string& name = "");

class Sequential : public Model {
 public:
  explicit Sequential(const std::vector<Layer>& layers = {}, const std::string& name = "");

  // Appends a layer; when the input shape is known the layer builds now.
  void add(const Layer& layer);
  // Declares the input (as an InputLayer first in the list would).
  void add(const KerasTensor& input);
  // Builds every layer for inputs of this shape (without the batch dimension).
  void build(const Dims& input_shape, DType dtype = DType::kF32);
};

}  // namespace nimbus::nn
