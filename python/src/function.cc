// nimbus::Function for nimbus.function (python/nimbus/function.py, which turns Python arguments and
// results of any nesting into the flat tensor lists the engine traces, and keys traces by the Python
// values among the arguments). The Python body runs with the GIL, only while the engine traces it;
// a traced graph runs without the GIL, so other Python threads go on meanwhile.
#include "nimbus/graph/function.h"

#include <fmt/format.h>

#include <memory>
#include <optional>
#include <string>

#include "bindings.h"
#include "nimbus/autodiff/variable.h"

namespace nimbus::python {
namespace {

// The Python function a Function traces, callable from the engine on a thread that does not hold the GIL.
class PythonBody {
 public:
  explicit PythonBody(py::function body) : body_(held_with_gil(std::move(body))) {}

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const {
    py::gil_scoped_acquire gil;
    return (*body_)(inputs).cast<std::vector<Tensor>>();
  }

 private:
  std::shared_ptr<py::object> body_;
};

// [(shape with -1 for a dynamic dimension, dtype), ...] from function.py's TensorSpecs.
std::vector<InputSignature> input_signature_of(const py::list& specs) {
  std::vector<InputSignature> signature;
  for (const py::handle spec : specs) {
    const auto pair = spec.cast<py::tuple>();
    signature.push_back({pair[0].cast<std::vector<int64_t>>(), dtype_from_python(pair[1])});
  }
  return signature;
}

}  // namespace

void bind_function(py::module_& m) {
  py::class_<Function>(m, "Function")
      .def(py::init([](py::function body, const std::string& name, std::optional<bool> jit,
                       const std::optional<py::list>& input_signature) {
             FunctionOptions options{.name = name, .jit = jit};
             if (input_signature) options.input_signature = input_signature_of(*input_signature);
             return Function(PythonBody(std::move(body)), std::move(options));
           }),
           py::arg("body"), py::arg("name"), py::arg("jit"), py::arg("input_signature"))
      .def("__call__",
           [](const Function& function, const std::vector<Tensor>& inputs) {
             py::gil_scoped_release release;
             return function(inputs);
           })
      .def_property_readonly("trace_count", &Function::trace_count)
      .def(
          "trace",
          [](const Function& function, const std::vector<Tensor>& inputs) {
            py::gil_scoped_release release;
            function.traced_for(inputs);
          },
          py::arg("inputs"))
      .def(
          "graph_text",
          [](const Function& function, const std::vector<Tensor>& inputs, const std::string& name, bool optimized) {
            py::gil_scoped_release release;
            const TracedGraph& traced = function.traced_for(inputs);
            return (optimized ? traced.optimized : traced.traced).to_text(name);
          },
          py::arg("inputs"), py::arg("name"), py::arg("optimized"));

  // A variable passed as an argument keys the trace by which variable it is: Python wrappers of one
  // variable are distinct objects (model.trainable_variables makes new ones on every access).
  m.def(
      "variable_identity", [](const Variable& variable) { return variable.value().id(); }, py::arg("variable"));
}

}  // namespace nimbus::python
