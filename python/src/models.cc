// Layers, symbolic tensors, models, mixed-precision policies and weight files (nimbus::nn) for
// nimbus.keras: layers are made from Keras's class name and config (nn::layer_from_config), so
// python/nimbus/keras/layers.py only maps Keras's arguments onto a config. Configs cross as JSON text.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "bindings.h"
#include "nimbus/nn/dtype_policy.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/tensor/safetensors.h"

namespace nimbus::python {
namespace {

using nn::Dims;
using nn::KerasTensor;
using nn::Layer;

std::vector<Tensor> tensors_of(const py::sequence& values) {
  std::vector<Tensor> tensors;
  for (const py::handle value : values) tensors.push_back(to_tensor(value));
  return tensors;
}

// A layer or model call on real tensors: one tensor in gives one out, a list gives a list.
py::object call_on_tensors(const py::object& inputs, bool training,
                           const std::function<std::vector<Tensor>(const std::vector<Tensor>&, bool)>& call) {
  const bool many = py::isinstance<py::list>(inputs) || py::isinstance<py::tuple>(inputs);
  const std::vector<Tensor> outputs =
      call(many ? tensors_of(inputs) : std::vector<Tensor>{to_tensor(inputs)}, training);
  if (!many && outputs.size() == 1) return py::cast(outputs[0]);
  return py::cast(outputs);
}

}  // namespace

void bind_models(py::module_& m) {
  py::class_<nn::DTypePolicy>(m, "DTypePolicy")
      .def(py::init(&nn::DTypePolicy::named), py::arg("name"))
      .def_readonly("name", &nn::DTypePolicy::name)
      .def_readonly("compute_dtype", &nn::DTypePolicy::compute_dtype)
      .def_readonly("variable_dtype", &nn::DTypePolicy::variable_dtype);
  m.def("global_policy", &nn::global_policy);
  m.def("set_global_policy", py::overload_cast<std::string_view>(&nn::set_global_policy), py::arg("name"));
  m.def("apply_activation",
        [](const std::string& name, const py::object& x) { return nn::apply_activation(name, to_tensor(x)); });
  m.def(
      "initialize",
      [](const std::string& name, std::optional<uint64_t> seed, const std::vector<int64_t>& shape,
         const py::object& dtype) {
        return nn::Initializer(name, seed)
            .make(Shape(shape), dtype.is_none() ? nn::floatx() : dtype_from_python(dtype));
      },
      py::arg("name"), py::arg("seed"), py::arg("shape"), py::arg("dtype") = py::none());

  py::class_<KerasTensor>(m, "KerasTensor")
      .def_property_readonly("_shape", [](const KerasTensor& t) { return py::tuple(py::cast(t.shape())); })
      .def_property_readonly("dtype", &KerasTensor::dtype)
      // The graph behind the tensor: the layer call that made it and that call's inputs.
      .def_property_readonly("_layer", [](const KerasTensor& t) { return Layer(t.node()->layer); })
      .def_property_readonly("_inputs", [](const KerasTensor& t) { return t.node()->inputs; })
      .def_property_readonly("_node", [](const KerasTensor& t) { return t.node()->id; })
      .def("__repr__", [](const KerasTensor& t) {
        return "<KerasTensor shape=" + py::repr(py::tuple(py::cast(t.shape()))).cast<std::string>() + ">";
      });
  m.def(
      "Input",
      [](const Dims& shape, const py::object& dtype, const std::string& name) {
        return nn::Input(shape, dtype.is_none() ? DType::kF32 : dtype_from_python(dtype), name);
      },
      py::arg("shape"), py::arg("dtype") = py::none(), py::arg("name") = "");

  py::class_<Layer>(m, "Layer")
      .def_static(
          "from_config",
          [](const std::string& class_name, const std::string& config) {
            return nn::layer_from_config(class_name, nlohmann::json::parse(config));
          },
          py::arg("class_name"), py::arg("config_json"))
      .def_property_readonly("name", &Layer::name)
      // Identifies the layer itself: the Python wrapper of a layer is found by it.
      .def_property_readonly("_key", [](const Layer& l) { return reinterpret_cast<uintptr_t>(l.impl().get()); })
      .def_property_readonly("class_name", [](const Layer& l) { return l->class_name(); })
      .def_property(
          "trainable", [](const Layer& l) { return l->trainable; },
          [](const Layer& l, bool trainable) { l->trainable = trainable; })
      .def_property(
          "dtype_policy", [](const Layer& l) { return l->dtype_policy; },
          [](const Layer& l, const nn::DTypePolicy& policy) { l->dtype_policy = policy; })
      .def_property_readonly("built", [](const Layer& l) { return l->built(); })
      .def_property_readonly("weights", [](const Layer& l) { return l->weights(); })
      .def_property_readonly("trainable_weights", [](const Layer& l) { return l->trainable_weights(); })
      .def_property_readonly("non_trainable_weights", [](const Layer& l) { return l->non_trainable_weights(); })
      .def("count_params", [](const Layer& l) { return l->count_params(); })
      .def("get_config_json", [](const Layer& l) { return l->get_config().dump(); })
      .def("call_symbolic",
           [](const Layer& l, const std::vector<KerasTensor>& inputs) {
             return inputs.size() == 1 ? l(inputs[0]) : l(inputs);
           })
      .def(
          "call",
          [](const Layer& l, const py::object& inputs, bool training) {
            return call_on_tensors(inputs, training, [&](const std::vector<Tensor>& x, bool t) { return l(x, t); });
          },
          py::arg("inputs"), py::arg("training") = false)
      .def(
          "adapt", [](const Layer& l, const py::object& data) { nn::adapt(l, to_tensor(data)); }, py::arg("data"));

  py::class_<nn::Model>(m, "Model")
      .def(py::init<const std::vector<KerasTensor>&, const std::vector<KerasTensor>&, const std::string&>(),
           py::arg("inputs"), py::arg("outputs"), py::arg("name") = "")
      .def_property_readonly("name", &nn::Model::name)
      .def_property_readonly("layers", &nn::Model::layers)
      .def_property_readonly("built", &nn::Model::built)
      .def_property_readonly("weights", &nn::Model::weights)
      .def_property_readonly("trainable_weights", &nn::Model::trainable_weights)
      .def_property_readonly("non_trainable_weights", &nn::Model::non_trainable_weights)
      .def_property_readonly("inputs", &nn::Model::inputs)
      .def_property_readonly("outputs", &nn::Model::outputs)
      .def("get_layer", &nn::Model::get_layer, py::arg("name"))
      .def("count_params", &nn::Model::count_params)
      .def("to_config_json", [](const nn::Model& model) { return model.to_config().dump(); })
      .def("summary_string", &nn::Model::summary_string)
      .def("save", &nn::Model::save, py::arg("path"))
      .def(
          "call",
          [](const nn::Model& model, const py::object& inputs, bool training) {
            return call_on_tensors(inputs, training, [&](const std::vector<Tensor>& x, bool t) { return model(x, t); });
          },
          py::arg("inputs"), py::arg("training") = false);

  py::class_<nn::Sequential, nn::Model>(m, "Sequential")
      .def(py::init<const std::vector<Layer>&, const std::string&>(), py::arg("layers"), py::arg("name") = "")
      .def("add", py::overload_cast<const Layer&>(&nn::Sequential::add), py::arg("layer"))
      .def("add_input", py::overload_cast<const KerasTensor&>(&nn::Sequential::add), py::arg("input"))
      .def(
          "build",
          [](nn::Sequential& model, const Dims& input_shape, const py::object& dtype) {
            model.build(input_shape, dtype.is_none() ? DType::kF32 : dtype_from_python(dtype));
          },
          py::arg("input_shape"), py::arg("dtype") = py::none());

  m.def("load_model", &nn::load_model, py::arg("path"));
  // Weight files (model.save_weights): named tensors in order, and string metadata.
  m.def(
      "write_safetensors",
      [](const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
         const std::map<std::string, std::string>& metadata) { write_safetensors(path, tensors, metadata); },
      py::arg("path"), py::arg("tensors"), py::arg("metadata"));
  m.def(
      "read_safetensors",
      [](const std::string& path) {
        SafetensorsFile file = read_safetensors(path);
        return py::make_tuple(file.tensors, file.metadata);
      },
      py::arg("path"));
  m.def("model_from_config_json",
        [](const std::string& config) { return nn::model_from_config(nlohmann::json::parse(config)); });
}

}  // namespace nimbus::python
