// The engine's GradientTape for nimbus.GradientTape (python/nimbus/gradient_tape.py, which adds
// TensorFlow's context manager, nested structures and error classes). A C++ tape records the op calls
// of the thread that made it while it lives and is not paused; the Python tape makes one on entering
// its `with` block and pauses it on leaving, keeping it for gradient().
#include <memory>
#include <optional>
#include <thread>

#include "bindings.h"
#include "nimbus/autodiff/gradient_tape.h"

namespace nimbus::python {
namespace {

// Holds a C++ tape and the thread it records on.
class PythonTape {
 public:
  PythonTape(bool persistent, bool watch_accessed_variables)
      : tape_(std::make_unique<GradientTape>(persistent, watch_accessed_variables)) {}
  PythonTape(const PythonTape&) = delete;
  PythonTape& operator=(const PythonTape&) = delete;

  // A tape is listed in its thread's thread-local registries, which only that thread may edit: one
  // dropped by another thread (a tape handed to a worker thread and collected there) is left in place,
  // paused, rather than corrupting them.
  ~PythonTape() {
    if (std::this_thread::get_id() != thread_) {
      tape_->pause();
      static_cast<void>(tape_.release());
    }
  }

  GradientTape& tape() { return *tape_; }

 private:
  std::unique_ptr<GradientTape> tape_;
  std::thread::id thread_ = std::this_thread::get_id();
};

// A gradient source: a tensor, or a variable's tensor (which tapes know it by).
Tensor source_tensor(const py::handle& source) {
  if (py::isinstance<Variable>(source)) return source.cast<Variable>().value();
  return source.cast<Tensor>();
}

py::list gradient(PythonTape& self, const std::vector<Tensor>& targets, const py::list& sources,
                  const std::vector<std::optional<Tensor>>& output_gradients, bool unconnected_zero) {
  std::vector<Tensor> source_tensors;
  for (const py::handle source : sources) source_tensors.push_back(source_tensor(source));
  std::vector<Tensor> seeds;
  for (const auto& seed : output_gradients) seeds.push_back(seed.value_or(Tensor()));
  std::vector<Tensor> grads;
  {
    py::gil_scoped_release release;  // the backward pass runs kernels only
    grads = self.tape().gradient(targets, source_tensors, seeds,
                                 unconnected_zero ? UnconnectedGradients::kZero : UnconnectedGradients::kNone);
  }
  py::list result;
  for (const Tensor& grad : grads) result.append(grad.defined() ? py::cast(grad) : py::none());
  return result;
}

}  // namespace

void bind_autodiff(py::module_& m) {
  py::class_<PythonTape>(m, "GradientTape")
      .def(py::init<bool, bool>(), py::arg("persistent"), py::arg("watch_accessed_variables"))
      .def("pause", [](PythonTape& self) { self.tape().pause(); })
      .def("resume", [](PythonTape& self) { self.tape().resume(); })
      .def("watch", [](PythonTape& self, const Tensor& tensor) { self.tape().watch(tensor); })
      .def("watch", [](PythonTape& self, const Variable& variable) { self.tape().watch(variable); })
      .def("watched_variables", [](PythonTape& self) { return self.tape().watched_variables(); })
      .def("gradient", &gradient, py::arg("targets"), py::arg("sources"), py::arg("output_gradients"),
           py::arg("unconnected_zero"));
}

}  // namespace nimbus::python
