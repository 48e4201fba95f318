// Layers, symbolic tensors and models (nimbus::nn) for nimbus.keras: layers are made from Keras's
// class name and config (nn::layer_from_config), so python/nimbus/keras/layers.py only maps Keras's
// arguments onto a config. Configs cross as JSON text.
#include <nlohmann/json.hpp>

#include "bindings.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"

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
  py::class_<KerasTensor>(m, "KerasTensor")
      .def_property_readonly("_shape", [](const KerasTensor& t) { return py::tuple(py::cast(t.shape())); })
      .def_property_readonly("dtype", &KerasTensor::dtype)
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
      .def_property_readonly("class_name", [](const Layer& l) { return l->class_name(); })
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
          py::arg("inputs"), py::arg("training") = false);

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
  m.def("model_from_config_json",
        [](const std::string& config) { return nn::model_from_config(nlohmann::json::parse(config)); });
}

}  // namespace nimbus::python
