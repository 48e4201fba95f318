// Losses and metrics (train/losses.h, train/metrics.h) for nimbus.keras.losses and nimbus.keras.metrics.
// A Python function can be a loss too: the trainer calls it (with the GIL) on the step's tensors, so
// it must compute with nimbus ops; in graph mode it runs once, when the step is traced.
#include <fmt/format.h>

#include "bindings.h"
#include "nimbus/base/error.h"
#include "nimbus/train/losses.h"
#include "nimbus/train/metrics.h"

namespace nimbus::python {
namespace {

using train::Loss;
using train::Metric;

Loss python_loss(const std::string& name, py::object function) {
  std::shared_ptr<py::object> held = held_with_gil(std::move(function));
  return Loss(name, [held, name](const Tensor& y_true, const Tensor& y_pred) {
    const py::gil_scoped_acquire gil;
    const py::object result = (*held)(y_true, y_pred);
    if (result.is_none()) {
      throw InvalidArgument(fmt::format("loss function '{}' returned None", name),
                            "return the loss per sample (or its mean) as a nimbus tensor");
    }
    return to_tensor(result);
  });
}

}  // namespace

void bind_losses_metrics(py::module_& m) {
  py::class_<Loss>(m, "Loss")
      .def_property_readonly("name", &Loss::name)
      .def("per_sample", [](const Loss& loss, const py::object& y_true,
                            const py::object& y_pred) { return loss.per_sample(to_tensor(y_true), to_tensor(y_pred)); })
      .def("__call__", [](const Loss& loss, const py::object& y_true, const py::object& y_pred) {
        return loss(to_tensor(y_true), to_tensor(y_pred));
      });
  m.def(
      "make_loss",
      [](const std::string& name, bool from_logits, double label_smoothing, double delta) {
        if (name == "sparse_categorical_crossentropy") {
          return train::SparseCategoricalCrossentropy({from_logits, label_smoothing});
        }
        if (name == "categorical_crossentropy") return train::CategoricalCrossentropy({from_logits, label_smoothing});
        if (name == "binary_crossentropy") return train::BinaryCrossentropy({from_logits, label_smoothing});
        if (name == "huber") return train::Huber(delta);
        return train::get_loss(name, from_logits);
      },
      py::arg("name"), py::arg("from_logits") = false, py::arg("label_smoothing") = 0.0, py::arg("delta") = 1.0);
  m.def("python_loss", &python_loss, py::arg("name"), py::arg("function"));

  py::class_<Metric, std::shared_ptr<Metric>>(m, "Metric")
      .def_property("name", &Metric::name, &Metric::set_name)
      .def(
          "update_state",
          [](Metric& metric, const py::object& y_true, const py::object& y_pred) {
            metric.update_state(to_tensor(y_true), to_tensor(y_pred));
          },
          py::arg("y_true"), py::arg("y_pred"))
      .def("result", &Metric::result)
      .def("reset_state", &Metric::reset_state);
  m.def(
      "make_metric",
      [](const std::string& kind, const std::string& name, double threshold, int64_t k,
         int num_thresholds) -> std::shared_ptr<Metric> {
        if (kind == "Accuracy") return train::Accuracy(name);
        if (kind == "SparseCategoricalAccuracy") return train::SparseCategoricalAccuracy(name);
        if (kind == "CategoricalAccuracy") return train::CategoricalAccuracy(name);
        if (kind == "BinaryAccuracy") return train::BinaryAccuracy(threshold, name);
        if (kind == "SparseTopKCategoricalAccuracy") return train::SparseTopKCategoricalAccuracy(k, name);
        if (kind == "Precision") return train::Precision(threshold, name);
        if (kind == "Recall") return train::Recall(threshold, name);
        if (kind == "AUC") return train::AUC(num_thresholds, name);
        if (kind == "Mean") return train::Mean(name);
        throw InvalidArgument(fmt::format("no metric class '{}'", kind));
      },
      py::arg("kind"), py::arg("name"), py::arg("threshold") = 0.5, py::arg("k") = 5, py::arg("num_thresholds") = 200);
  m.def(
      "get_metric",
      [](const std::string& name, const std::string& loss_name, bool from_logits) {
        return train::get_metric(name, train::get_loss(loss_name, from_logits));
      },
      py::arg("name"), py::arg("loss_name"), py::arg("from_logits") = false);
}

}  // namespace nimbus::python
