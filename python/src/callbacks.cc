// The engine's callbacks (train/callbacks.h, train/tensorboard.h) for nimbus.keras.callbacks, which maps
// Keras's arguments onto these. Python subclasses of keras.callbacks.Callback are bridged in training.cc.
#include "nimbus/train/callbacks.h"

#include "bindings.h"
#include "nimbus/train/tensorboard.h"

namespace nimbus::python {

void bind_callbacks(py::module_& m) {
  using train::Callback;
  py::class_<Callback, std::shared_ptr<Callback>>(m, "Callback");

  m.def(
      "EarlyStopping",
      [](const std::string& monitor, double min_delta, int patience, const std::string& mode,
         bool restore_best_weights) {
        return train::EarlyStopping({.monitor = monitor,
                                     .min_delta = min_delta,
                                     .patience = patience,
                                     .mode = mode,
                                     .restore_best_weights = restore_best_weights});
      },
      py::arg("monitor"), py::arg("min_delta"), py::arg("patience"), py::arg("mode"), py::arg("restore_best_weights"));
  m.def(
      "ReduceLROnPlateau",
      [](const std::string& monitor, double factor, int patience, const std::string& mode, double min_delta,
         int cooldown, double min_lr) {
        return train::ReduceLROnPlateau({.monitor = monitor,
                                         .factor = factor,
                                         .patience = patience,
                                         .mode = mode,
                                         .min_delta = min_delta,
                                         .cooldown = cooldown,
                                         .min_lr = min_lr});
      },
      py::arg("monitor"), py::arg("factor"), py::arg("patience"), py::arg("mode"), py::arg("min_delta"),
      py::arg("cooldown"), py::arg("min_lr"));
  m.def(
      "LearningRateScheduler",
      [](py::object schedule) {
        // Called from fit, which runs without the GIL.
        std::shared_ptr<py::object> held = held_with_gil(std::move(schedule));
        return train::LearningRateScheduler([held](int epoch, double rate) {
          const py::gil_scoped_acquire gil;
          return (*held)(epoch, rate).cast<double>();
        });
      },
      py::arg("schedule"));
  m.def("CSVLogger", &train::CSVLogger, py::arg("filename"), py::arg("append"));
  m.def("TerminateOnNaN", &train::TerminateOnNaN);
  m.def(
      "ModelCheckpoint",
      [](const std::string& filepath, const std::string& monitor, bool save_best_only, const std::string& mode,
         int64_t save_freq) {
        return train::ModelCheckpoint({.filepath = filepath,
                                       .monitor = monitor,
                                       .save_best_only = save_best_only,
                                       .mode = mode,
                                       .save_freq = save_freq});
      },
      py::arg("filepath"), py::arg("monitor"), py::arg("save_best_only"), py::arg("mode"), py::arg("save_freq"));
  m.def(
      "TensorBoard",
      [](const std::string& log_dir, int64_t update_freq) {
        return train::TensorBoard({.log_dir = log_dir, .update_freq = update_freq});
      },
      py::arg("log_dir"), py::arg("update_freq"));
}

}  // namespace nimbus::python
