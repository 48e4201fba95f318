// The trainer (train/trainer.h) behind nimbus.keras.Model's compile, fit, evaluate and predict.
//
// fit (from arrays or a nimbus.data.Dataset), evaluate, predict and train_on_batch run without the GIL. fit takes it
// back at each step's end, and only there: to check for signals (Ctrl-C raises KeyboardInterrupt out of fit at that
// step boundary, instead of the CLI's checkpoint-on-SIGINT, which the Python path never installs), for the Python
// callbacks' hooks, and to write the progress bar to sys.stdout. A Python exception raised there propagates out of fit
// unchanged.
#include <fmt/format.h>
#include <pybind11/iostream.h>

#include "bindings.h"
#include "nimbus/base/error.h"
#include "nimbus/data/dataset.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/train/trainer.h"

namespace nimbus::python {
namespace {

using train::Callback;
using train::Logs;
using train::Trainer;

py::dict dict_of(const Logs& logs) {
  py::dict dict;
  for (const auto& [name, value] : logs) dict[py::str(name)] = value;
  return dict;
}

// Raises the pending KeyboardInterrupt (or another signal handler's exception) at a step boundary.
void raise_pending_signal() {
  const py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

class SignalCheck : public Callback {
 public:
  void on_train_batch_end(Trainer&, int64_t, const Logs&) override { raise_pending_signal(); }
  void on_epoch_end(Trainer&, int, const Logs&) override { raise_pending_signal(); }
};

// A Python keras.callbacks.Callback: its hooks get Keras's arguments (epochs and batches counted from
// 0, logs as dicts). Batch hooks that the class does not override are not called at all, so a callback
// that only watches epochs costs the steps nothing. on_train_batch_begin(b) is called when batch b - 1
// ends (and for batch 0 when the epoch begins): before the batch runs, with nothing in between.
class PythonCallback : public Callback {
 public:
  PythonCallback(py::object callback, int verbose) : callback_(std::move(callback)), verbose_(verbose) {
    const py::object base = py::module_::import("nimbus.keras.callbacks").attr("Callback");
    // A hook is overridden when the callback's method (a bound method, or a function set on the
    // instance as LambdaCallback does) is not the base class's function.
    const auto overrides = [&](const char* hook) {
      const py::object method = callback_.attr(hook);
      return !py::getattr(method, "__func__", method).is(base.attr(hook));
    };
    batch_begin_ = overrides("on_train_batch_begin") || overrides("on_batch_begin");
    batch_end_ = overrides("on_train_batch_end") || overrides("on_batch_end");
  }

  void on_train_begin(Trainer& trainer) override {
    const py::gil_scoped_acquire gil;
    py::dict params;
    params["verbose"] = verbose_;
    params["epochs"] = trainer.params.epochs;
    params["steps"] = trainer.params.steps;
    callback_.attr("set_params")(params);
    callback_.attr("on_train_begin")(py::dict());
  }
  void on_epoch_begin(Trainer& trainer, int epoch) override {
    const py::gil_scoped_acquire gil;
    callback_.attr("on_epoch_begin")(epoch - 1, py::dict());
    if (batch_begin_ && !trainer.stop_training) callback_.attr("on_train_batch_begin")(0, py::dict());
  }
  void on_train_batch_end(Trainer& trainer, int64_t step, const Logs& logs) override {
    if (!batch_begin_ && !batch_end_) return;
    const py::gil_scoped_acquire gil;
    if (batch_end_) callback_.attr("on_train_batch_end")(step, dict_of(logs));
    if (batch_begin_ && !trainer.stop_training && step + 1 < trainer.params.steps) {
      callback_.attr("on_train_batch_begin")(step + 1, py::dict());
    }
  }
  void on_epoch_end(Trainer&, int epoch, const Logs& logs) override {
    const py::gil_scoped_acquire gil;
    last_logs_ = logs;
    callback_.attr("on_epoch_end")(epoch - 1, dict_of(logs));
  }
  void on_train_end(Trainer&) override {
    const py::gil_scoped_acquire gil;
    callback_.attr("on_train_end")(dict_of(last_logs_));
  }

 private:
  py::object callback_;
  int verbose_;
  bool batch_begin_ = false, batch_end_ = false;
  Logs last_logs_;
};

std::optional<int64_t> optional_int(const py::handle& value) {
  return value.is_none() ? std::nullopt : std::optional<int64_t>(value.cast<int64_t>());
}

std::optional<bool> optional_bool(const py::handle& value) {
  return value.is_none() ? std::nullopt : std::optional<bool>(value.cast<bool>());
}

py::dict history_dict(const train::History& history) {
  py::dict result;
  py::dict logs;
  for (const auto& [name, values] : history.history) logs[py::str(name)] = py::cast(values);
  result["history"] = logs;
  std::vector<int> epochs;
  for (const int epoch : history.epochs) epochs.push_back(epoch - 1);  // Keras counts epochs from 0
  result["epoch"] = epochs;
  result["steps"] = history.steps;
  result["samples"] = history.samples;
  result["wall_seconds"] = history.wall_seconds;
  result["samples_per_sec"] = history.samples_per_sec;
  return result;
}

// x and y are arrays, or x is a nimbus.data.Dataset's engine (its elements the (x, y) batches) and y None.
train::History fit(Trainer& trainer, const py::object& x, const py::object& y, const py::dict& options) {
  const std::optional<data::Dataset> dataset =
      py::isinstance<data::Dataset>(x) ? std::optional(x.cast<data::Dataset>()) : std::nullopt;
  const Tensor x_tensor = dataset ? Tensor() : to_tensor(x), y_tensor = dataset ? Tensor() : to_tensor(y);
  train::FitOptions fit;
  fit.epochs = options["epochs"].cast<int>();
  fit.batch_size = options["batch_size"].cast<int64_t>();
  fit.shuffle = options["shuffle"].cast<bool>();
  fit.initial_epoch = options["initial_epoch"].cast<int>();
  fit.steps_per_epoch = optional_int(options["steps_per_epoch"]);
  fit.graph = optional_bool(options["graph"]);
  fit.jit = optional_bool(options["jit"]);
  if (!options["seed"].is_none()) fit.seed = options["seed"].cast<uint64_t>();
  if (!options["validation_data"].is_none()) {
    const auto validation = options["validation_data"].cast<py::tuple>();
    fit.validation_data = {to_tensor(validation[0]), to_tensor(validation[1])};
  }
  if (!options["resume_from"].is_none()) {
    fit = Trainer::resumed(fit, trainer.restore_checkpoint(options["resume_from"].cast<std::string>()));
  }
  // The bar is the engine's, written to sys.stdout (a terminal gets it in place); fit's own would go to
  // std::cout, past Python's stdout.
  const int verbose = options["verbose"].cast<int>();
  fit.verbose = 0;
  const py::object out = py::module_::import("sys").attr("stdout");
  py::detail::pythonbuf buffer(out);
  std::ostream stream(&buffer);
  if (verbose > 0) fit.callbacks.push_back(train::ProgressBar(stream, verbose, out.attr("isatty")().cast<bool>()));
  for (const py::handle callback : options["callbacks"].cast<py::list>()) {
    const py::object native = py::getattr(callback, "_native", py::none());
    if (!native.is_none()) {
      fit.callbacks.push_back(native.cast<std::shared_ptr<Callback>>());
    } else {
      fit.callbacks.push_back(std::make_shared<PythonCallback>(py::reinterpret_borrow<py::object>(callback), verbose));
    }
  }
  // Last: every callback has seen the step that a Ctrl-C ends fit after.
  fit.callbacks.push_back(std::make_shared<SignalCheck>());
  const py::gil_scoped_release release;
  if (dataset) return trainer.fit(*dataset, fit);
  return trainer.fit(x_tensor, y_tensor, fit);
}

train::EvaluateOptions evaluate_options(int64_t batch_size, const py::object& steps, const py::object& graph,
                                        const py::object& jit) {
  train::EvaluateOptions options;
  options.batch_size = batch_size;
  options.steps = optional_int(steps);
  options.graph = optional_bool(graph);
  options.jit = optional_bool(jit);
  return options;
}

// Runs evaluate or predict without the GIL; a batch split to fit the device's memory is said on sys.stdout.
template <typename Work>
auto without_gil(const Work& work, train::EvaluateOptions& options) {
  py::detail::pythonbuf buffer(py::module_::import("sys").attr("stdout"));
  std::ostream stream(&buffer);
  options.output = &stream;
  const py::gil_scoped_release release;
  return work();
}

}  // namespace

void bind_training(py::module_& m) {
  py::class_<Trainer>(m, "Trainer")
      .def(py::init([](const nn::Model& model, std::shared_ptr<train::Optimizer> optimizer, const train::Loss& loss,
                       const std::vector<std::string>& metrics,
                       const std::vector<std::shared_ptr<train::Metric>>& metric_objects,
                       std::shared_ptr<distribute::Strategy> strategy) {
             return Trainer(model, {.optimizer = std::move(optimizer),
                                    .loss = loss,
                                    .metrics = metrics,
                                    .metric_objects = metric_objects,
                                    .strategy = std::move(strategy)});
           }),
           py::arg("model"), py::arg("optimizer"), py::arg("loss"), py::arg("metrics"), py::arg("metric_objects"),
           py::arg("strategy") = nullptr)
      .def_property_readonly("metrics_names", &Trainer::metric_names)
      .def_readwrite("stop_training", &Trainer::stop_training)
      .def("fit", [](Trainer& trainer, const py::object& x, const py::object& y,
                     const py::dict& options) { return history_dict(fit(trainer, x, y, options)); })
      .def(
          "evaluate",
          [](Trainer& trainer, const py::object& x, const py::object& y, int64_t batch_size, const py::object& steps,
             const py::object& graph, const py::object& jit) {
            const Tensor x_tensor = to_tensor(x), y_tensor = to_tensor(y);
            train::EvaluateOptions options = evaluate_options(batch_size, steps, graph, jit);
            const Logs logs = without_gil([&] { return trainer.evaluate(x_tensor, y_tensor, options); }, options);
            return dict_of(logs);
          },
          py::arg("x"), py::arg("y"), py::arg("batch_size"), py::arg("steps"), py::arg("graph"), py::arg("jit"))
      .def(
          "predict",
          [](Trainer& trainer, const py::object& x, int64_t batch_size, const py::object& steps,
             const py::object& graph, const py::object& jit) {
            const Tensor x_tensor = to_tensor(x);
            train::EvaluateOptions options = evaluate_options(batch_size, steps, graph, jit);
            const Tensor outputs = without_gil([&] { return trainer.predict(x_tensor, options); }, options);
            return tensor_to_numpy(outputs);
          },
          py::arg("x"), py::arg("batch_size"), py::arg("steps"), py::arg("graph"), py::arg("jit"))
      .def(
          "train_on_batch",
          [](Trainer& trainer, const py::object& x, const py::object& y) {
            const Tensor x_tensor = to_tensor(x), y_tensor = to_tensor(y);
            Logs logs;
            {
              const py::gil_scoped_release release;
              logs = trainer.train_on_batch(x_tensor, y_tensor);
            }
            return dict_of(logs);
          },
          py::arg("x"), py::arg("y"));
}

}  // namespace nimbus::python
