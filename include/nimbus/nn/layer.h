// Layers: Keras's building blocks. A layer holds its weights as Variables,
// creates them the first time it is called (when it learns its input shape),
// and maps input tensors to output tensors.
//
//   nn::Layer dense = nn::Dense(128, {.activation = "relu"});
//   Tensor y = dense(x);                        // eager: builds a (784, 128) kernel on this first call
//   dense.weights();                            // {dense/kernel, dense/bias}
//
//   nn::KerasTensor in = nn::Input({28, 28, 1});  // functional API: symbolic tensors (batch dimension -1)
//   nn::KerasTensor out = nn::Dense(10)(nn::Flatten()(in));
//
// Shapes of symbolic tensors (`Dims`) include the batch dimension as -1.
// Calling a layer on a KerasTensor builds it and checks its arguments against
// the input shape: a bad combination (a Conv2D kernel larger than its input
// with padding "valid", a Conv2D on a rank-2 input, a pooling window that
// shrinks a dimension to zero) is an InvalidArgument naming the layer, its
// index in the model and the shapes, raised while the model is put together,
// before any data flows.
//
// Writing a layer: derive from LayerImpl, check shapes and compute the output
// shape in compute_output_shapes, create weights with add_weight in build,
// compute with ops in call; wrap it with nn::Layer(std::make_shared<MyLayer>(...)).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nimbus/autodiff/variable.h"
#include "nimbus/nn/dtype_policy.h"
#include "nimbus/nn/initializers.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus::nn {

// A shape whose dimensions may be unknown (-1): the batch dimension always is.
using Dims = std::vector<int64_t>;

// The dtype new weights get (Keras's floatx): f32 unless set; tests set f64
// to check gradients by finite differences.
DType floatx();
void set_floatx(DType dtype);

// "(None, 28, 28, 32)", as Keras prints shapes.
std::string format_dims(const Dims& dims);

class LayerImpl {
 public:
  LayerImpl(std::string class_name, std::string name);
  virtual ~LayerImpl();
  LayerImpl(const LayerImpl&) = delete;
  LayerImpl& operator=(const LayerImpl&) = delete;

  // "Dense", "Conv2D", ...
  const std::string& class_name() const { return class_name_; }
  // Unique per class in the process unless given: "dense", "dense_1", ...
  const std::string& name() const { return name_; }

  // How many inputs call() takes; -1 for any number >= 2 (Add, Concatenate, MultiHeadAttention).
  virtual int num_inputs() const { return 1; }
  // Keras's names of call()'s tensor arguments, in the order call() takes them, for layers that
  // take them by keyword (MultiHeadAttention: query, value, key, attention_mask); empty for the
  // rest. model_from_config places a Keras JSON node's keyword tensors by these names.
  virtual std::vector<std::string> input_names() const { return {}; }
  // Checks the inputs (throwing InvalidArgument with the reason; the caller
  // adds the layer's name and index) and returns the output shapes.
  virtual std::vector<Dims> compute_output_shapes(const std::vector<Dims>& input_shapes) const = 0;
  // Creates the weights. Called once, after compute_output_shapes accepted the shapes.
  virtual void build(const std::vector<Dims>& input_shapes) { (void)input_shapes; }
  // The computation, with ops (so it runs eagerly and traces into graphs alike).
  virtual std::vector<Tensor> call(const std::vector<Tensor>& inputs, bool training) = 0;
  // Keras's get_config(): the constructor's arguments by their Keras names, with "name";
  // nn::layer_from_config(class_name(), get_config()) makes an equal, unbuilt layer.
  virtual nlohmann::json get_config() const { return {{"name", name_}}; }

  // Checks and builds on the first call; later calls check nothing.
  void ensure_built(const std::vector<Dims>& input_shapes);
  bool built() const { return built_; }

  // Variables in creation order; trainable ones exclude everything when the layer is frozen.
  std::vector<Variable> weights() const;
  std::vector<Variable> trainable_weights() const;
  std::vector<Variable> non_trainable_weights() const;
  int64_t count_params() const;
  // Sum of the weight regularizers' penalties (undefined when there are none).
  Tensor regularization_loss() const;

  // Frozen layers keep their weights out of trainable_weights (Keras's layer.trainable = False).
  bool trainable = true;
  // Mixed precision (nn/dtype_policy.h): the global policy when the layer was made, unless set.
  DTypePolicy dtype_policy;
  // call() under dtype_policy: floating inputs cast to its compute dtype, the ops under an
  // AutocastScope. Models and Layer handles call layers through it.
  std::vector<Tensor> call_with_policy(const std::vector<Tensor>& inputs, bool training);

 protected:
  Variable add_weight(const std::string& weight_name, const Shape& shape, const Initializer& initializer,
                      bool trainable = true, const Regularizer& regularizer = {});

 private:
  struct Weight {
    Variable variable;
    bool trainable;
    Regularizer regularizer;
  };
  std::string class_name_;
  std::string name_;
  bool built_ = false;
  std::vector<Weight> weights_;
};

// A fresh layer name for a class: "dense", then "dense_1", "dense_2", ...
std::string unique_layer_name(const std::string& prefix);
// Forgets the counters (Keras's clear_session): the next Dense is "dense" again.
void reset_layer_names();

class Layer;

// A symbolic tensor of the functional API: a shape (batch -1), a dtype, and
// the layer call that produces it.
class KerasTensor {
 public:
  struct Node {
    std::shared_ptr<LayerImpl> layer;
    std::vector<KerasTensor> inputs;
    std::vector<Dims> output_shapes;
    DType dtype = DType::kF32;
    uint64_t id = 0;
  };

  KerasTensor() = default;
  KerasTensor(std::shared_ptr<Node> node, int output_index) : node_(std::move(node)), output_index_(output_index) {}

  bool defined() const { return node_ != nullptr; }
  const Dims& shape() const { return node_->output_shapes[static_cast<size_t>(output_index_)]; }
  DType dtype() const { return node_->dtype; }
  const std::shared_ptr<Node>& node() const { return node_; }
  int output_index() const { return output_index_; }

 private:
  std::shared_ptr<Node> node_;
  int output_index_ = 0;
};

// The input of a functional model: `shape` excludes the batch dimension.
KerasTensor Input(const Dims& shape, DType dtype = DType::kF32, const std::string& name = "");

// A handle to a layer (copies refer to the same layer, with the same weights).
class Layer {
 public:
  Layer() = default;
  explicit Layer(std::shared_ptr<LayerImpl> impl) : impl_(std::move(impl)) {}

  // Eager (or traced) calls; the first builds the layer from the inputs' shapes.
  Tensor operator()(const Tensor& input, bool training = false) const;
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs, bool training = false) const;
  // Symbolic calls (functional API): build the layer and check its arguments.
  KerasTensor operator()(const KerasTensor& input) const;
  KerasTensor operator()(const std::vector<KerasTensor>& inputs) const;

  bool defined() const { return impl_ != nullptr; }
  LayerImpl* operator->() const { return impl_.get(); }
  LayerImpl& operator*() const { return *impl_; }
  const std::shared_ptr<LayerImpl>& impl() const { return impl_; }
  const std::string& name() const { return impl_->name(); }
  std::vector<Variable> weights() const { return impl_->weights(); }

 private:
  std::shared_ptr<LayerImpl> impl_;
};

// Applies a layer to symbolic inputs; `index` is the layer's position in the
// model, quoted in errors. Used by the functional API and Sequential.
KerasTensor apply_symbolic(const std::shared_ptr<LayerImpl>& layer, const std::vector<KerasTensor>& inputs, int index);

}  // namespace nimbus::nn
