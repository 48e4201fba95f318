// Python's operators on nimbus.Tensor and nimbus.Variable (+ - * / ** @, comparisons, unary - and abs,
// & | ~ on bools), bound straight to the engine's op functions: an eager `a + b` costs one pybind11
// call and one op dispatch. Operands that are not tensors (Python numbers, lists, NumPy arrays) take
// the tensor's dtype, as TensorFlow converts them; an operand of any other type gives NotImplemented,
// so Python tries the other side's operator. Indexing and the scalar conversions (__bool__, __float__,
// __format__, ...) are Python (python/nimbus/tensor_methods.py).
#include <fmt/format.h>

#include "bindings.h"
#include "nimbus/autodiff/variable.h"
#include "nimbus/base/error.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/linalg.h"

namespace nimbus::python {
namespace {

using BinaryOp = Tensor (*)(const Tensor&, const Tensor&);

Tensor matmul_operator(const Tensor& a, const Tensor& b) { return matmul(a, b); }

// `self op other` (reflected: `other op self`), or NotImplemented when `other` is no tensor value.
template <BinaryOp op, bool reflected>
py::object apply_binary(const Tensor& self, const py::handle& other) {
  if (!is_tensor_value(other)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  const Tensor operand = operand_like(other, self);
  return py::cast(reflected ? op(operand, self) : op(self, operand));
}

// The operators on a class whose instances read as a tensor through `tensor_of` (Tensor itself, or a
// Variable's value).
template <typename Class, const Tensor& (*tensor_of)(const Class&)>
void bind_operators_on(py::class_<Class>& cls) {
  const auto forward = [&cls](const char* name, auto op) {
    cls.def(name, [op](const Class& self, const py::handle& other) { return op(tensor_of(self), other); });
  };
  const auto both = [&forward](const char* name, const char* reflected_name, auto op, auto reflected) {
    forward(name, op);
    forward(reflected_name, reflected);
  };
  both("__add__", "__radd__", apply_binary<add, false>, apply_binary<add, true>);
  both("__sub__", "__rsub__", apply_binary<sub, false>, apply_binary<sub, true>);
  both("__mul__", "__rmul__", apply_binary<mul, false>, apply_binary<mul, true>);
  both("__truediv__", "__rtruediv__", apply_binary<true_divide, false>, apply_binary<true_divide, true>);
  both("__pow__", "__rpow__", apply_binary<pow, false>, apply_binary<pow, true>);
  both("__matmul__", "__rmatmul__", apply_binary<matmul_operator, false>, apply_binary<matmul_operator, true>);
  both("__and__", "__rand__", apply_binary<logical_and, false>, apply_binary<logical_and, true>);
  both("__or__", "__ror__", apply_binary<logical_or, false>, apply_binary<logical_or, true>);
  // Comparisons are elementwise, == and != included (TensorFlow 2.x); Python reflects them itself.
  forward("__lt__", apply_binary<less, false>);
  forward("__le__", apply_binary<less_equal, false>);
  forward("__gt__", apply_binary<greater, false>);
  forward("__ge__", apply_binary<greater_equal, false>);
  forward("__eq__", apply_binary<equal, false>);
  forward("__ne__", apply_binary<not_equal, false>);
  cls.def("__neg__", [](const Class& self) { return neg(tensor_of(self)); });
  cls.def("__abs__", [](const Class& self) { return abs(tensor_of(self)); });
  cls.def("__invert__", [](const Class& self) { return logical_not(tensor_of(self)); });
  // Defining __eq__ makes pybind11 drop the hash; tensors and variables keep hashing by identity
  // (TensorFlow refuses to hash them; docs/python.md, "Differences from TensorFlow").
  cls.def("__hash__", [](const py::handle& self) { return PyBaseObject_Type.tp_hash(self.ptr()); });
  // ndarray (op) tensor defers to the tensor's reflected operator, as with TensorFlow's tensors.
  cls.attr("__array_priority__") = 100;
}

const Tensor& tensor_itself(const Tensor& tensor) { return tensor; }
const Tensor& variable_value(const Variable& variable) { return variable.value(); }

}  // namespace

void bind_operators(py::module_& m) {
  auto tensor = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  auto variable = py::reinterpret_borrow<py::class_<Variable>>(m.attr("Variable"));
  bind_operators_on<Tensor, tensor_itself>(tensor);
  bind_operators_on<Variable, variable_value>(variable);
}

}  // namespace nimbus::python
