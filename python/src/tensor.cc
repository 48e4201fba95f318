// nimbus.Tensor and nimbus.Variable, dtypes, and the conversions between tensors and NumPy arrays.
// NumPy arrays of a supported dtype are wrapped without a copy in both directions where the memory
// allows it (docs/python.md lists when a conversion copies).
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "bindings.h"
#include "nimbus/autodiff/variable.h"
#include "nimbus/base/error.h"
#include "nimbus/data/element_function.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/shape_ops.h"
#include "nimbus/tensor/storage.h"

namespace nimbus::python {
namespace {

// TensorFlow's name of each dtype; nimbus.float32 etc. are these enumerators.
constexpr std::pair<DType, const char*> kPythonNames[] = {
    {DType::kF32, "float32"}, {DType::kF64, "float64"}, {DType::kF16, "float16"}, {DType::kBF16, "bfloat16"},
    {DType::kI32, "int32"},   {DType::kI64, "int64"},   {DType::kU8, "uint8"},    {DType::kBool, "bool"}};

const char* python_name(DType dtype) {
  for (const auto& [each, name] : kPythonNames) {
    if (each == dtype) return name;
  }
  return "?";
}

// The dtype of a NumPy dtype, if Nimbus has one.
std::optional<DType> dtype_of_numpy(const py::dtype& dtype) {
  if (dtype.kind() == 'f' && dtype.itemsize() == 4) return DType::kF32;
  if (dtype.kind() == 'f' && dtype.itemsize() == 8) return DType::kF64;
  if (dtype.kind() == 'f' && dtype.itemsize() == 2) return DType::kF16;
  if (dtype.kind() == 'i' && dtype.itemsize() == 4) return DType::kI32;
  if (dtype.kind() == 'i' && dtype.itemsize() == 8) return DType::kI64;
  if (dtype.kind() == 'u' && dtype.itemsize() == 1) return DType::kU8;
  if (dtype.kind() == 'b') return DType::kBool;
  return std::nullopt;
}

Shape shape_of(const py::array& array) {
  std::vector<int64_t> dims(array.shape(), array.shape() + array.ndim());
  return Shape(dims);
}

bool is_native_c_contiguous(const py::array& array) {
  const int flags = py::detail::array_proxy(array.ptr())->flags;
  return (flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_) != 0 && array.dtype().attr("isnative").cast<bool>();
}

// A CPU tensor over the array's memory; the tensor holds a reference to the array until its storage goes.
Tensor wrap_array(const py::array& array, DType dtype) {
  // The storage keeps the array alive; its release drops the array, under the GIL.
  auto release = [owner = held_with_gil(array)]() mutable { owner.reset(); };
  const auto bytes = static_cast<size_t>(array.nbytes());
  auto storage = std::make_shared<Storage>(Device::cpu(), const_cast<void*>(array.data()), bytes, release);
  return Tensor::view(std::move(storage), 0, shape_of(array), dtype);
}

// Python numbers and nested lists, in the dtype asked for, or typed as TensorFlow types them: floats
// float32, ints int32. A float with a fraction is refused for an integer dtype, as TensorFlow does.
py::array array_of_python_value(const py::handle& value, std::optional<DType> requested) {
  const py::array array = py::array::ensure(value);
  if (!array)
    throw InvalidArgument(fmt::format("cannot convert a {} to a tensor", py::str(value.get_type()).cast<std::string>()),
                          "pass a NumPy array, a number, a nested list of numbers or a nimbus.Tensor");
  const py::module_ numpy = py::module_::import("numpy");
  if (requested) {
    if (!is_floating(*requested) && array.dtype().kind() == 'f' &&
        !numpy.attr("all")(numpy.attr("equal")(numpy.attr("mod")(array, 1), 0)).cast<bool>()) {
      throw InvalidArgument(fmt::format("cannot convert {} to {}: it has a fraction",
                                        py::repr(value).cast<std::string>().substr(0, 80), python_name(*requested)),
                            "round it first, or use a floating dtype");
    }
    return numpy.attr("asarray")(array, numpy_dtype_of(*requested));
  }
  if (array.dtype().kind() == 'f') return array.attr("astype")("float32");
  if (array.dtype().kind() == 'i') return array.attr("astype")("int32");
  return array;
}

// The Python types of Tensor and Variable, looked up once: the operand checks of every op call are
// then a pointer comparison.
PyTypeObject* python_type_of_tensor() {
  static auto* type = reinterpret_cast<PyTypeObject*>(py::type::of<Tensor>().ptr());
  return type;
}
PyTypeObject* python_type_of_variable() {
  static auto* type = reinterpret_cast<PyTypeObject*>(py::type::of<Variable>().ptr());
  return type;
}
// numpy.generic, the base of NumPy's scalar types (kept for the process's life, as the module is).
PyObject* numpy_scalar_type() {
  static PyObject* type = py::object(py::module_::import("numpy").attr("generic")).release().ptr();
  return type;
}

// A Python number as a rank-0 tensor of `dtype` on `device`.
Tensor scalar_of_python_number(const py::handle& value, DType dtype, Device device) {
  const double number = PyFloat_Check(value.ptr()) ? PyFloat_AS_DOUBLE(value.ptr()) : PyLong_AsDouble(value.ptr());
  if (number == -1.0 && PyErr_Occurred()) throw py::error_already_set();
  if (!is_floating(dtype) && PyFloat_Check(value.ptr()) && number != std::trunc(number)) {
    throw InvalidArgument(fmt::format("cannot convert {} to {}: it has a fraction", number, python_name(dtype)),
                          "round it first, or cast the tensor to a floating dtype with nimbus.cast");
  }
  return full(Shape{}, number, dtype, device);
}

Tensor tensor_of_array(py::array array, std::optional<DType> requested) {
  const std::optional<DType> own = dtype_of_numpy(array.dtype());
  if (!own) {
    throw InvalidArgument(fmt::format("NumPy dtype {} has no nimbus dtype", py::str(array.dtype()).cast<std::string>()),
                          "cast the array to float32, float64, float16, int32, int64, uint8 or bool first");
  }
  const DType dtype = requested.value_or(*own);
  if (dtype == *own && is_native_c_contiguous(array)) return wrap_array(array, dtype);
  // A copy: another layout, byte order or dtype. bfloat16 goes through float32, which NumPy has.
  const py::array contiguous = py::array::ensure(array, py::array::c_style | py::array::forcecast);
  const Tensor wrapped = tensor_of_array(py::array(contiguous.attr("copy")()), std::nullopt);
  return dtype == *own ? wrapped : wrapped.to(dtype);
}

void make_read_only(py::array& array) {
  py::detail::array_proxy(array.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
}

// The shape as TensorFlow prints it, a Python tuple: (2, 3), (5,), ().
std::string shape_text(const Shape& shape) {
  std::string text = "(";
  for (int i = 0; i < shape.rank(); ++i) text += fmt::format("{}{}", i > 0 ? ", " : "", shape[i]);
  return text + (shape.rank() == 1 ? ",)" : ")");
}

// TensorFlow's repr and str: <nimbus.Tensor: shape=(2,), dtype=float32, numpy=array([1., 2.], dtype=float32)>
// and nimbus.Tensor([1. 2.], shape=(2,), dtype=float32).
std::string tensor_text(const Tensor& tensor, bool as_repr) {
  if (tensor.is_symbolic()) {
    return fmt::format("<nimbus.Tensor shape={} dtype={} (symbolic, inside nimbus.function)>",
                       shape_text(tensor.shape()), python_name(tensor.dtype()));
  }
  const py::array values = tensor_to_numpy(tensor);
  if (as_repr) {
    return fmt::format("<nimbus.Tensor: shape={}, dtype={}, numpy={}>", shape_text(tensor.shape()),
                       python_name(tensor.dtype()), py::repr(values).cast<std::string>());
  }
  return fmt::format("nimbus.Tensor({}, shape={}, dtype={})",
                     py::str(static_cast<const py::handle&>(values)).cast<std::string>(), shape_text(tensor.shape()),
                     python_name(tensor.dtype()));
}

py::tuple shape_tuple(const Shape& shape) {
  py::tuple dims(shape.rank());
  for (int i = 0; i < shape.rank(); ++i) dims[i] = shape[i];
  return dims;
}

}  // namespace

DType dtype_from_python(const py::handle& value) {
  if (py::isinstance<DType>(value)) return value.cast<DType>();
  if (py::isinstance<py::str>(value)) {
    const auto text = value.cast<std::string>();
    for (const auto& [dtype, name] : kPythonNames) {
      if (text == name) return dtype;
    }
    return parse_dtype(text);
  }
  const py::module_ numpy = py::module_::import("numpy");
  try {
    const py::dtype numpy_dtype = numpy.attr("dtype")(value);
    if (const auto dtype = dtype_of_numpy(numpy_dtype)) return *dtype;
  } catch (const py::error_already_set&) {
  }
  throw InvalidArgument(fmt::format("not a dtype: {}", py::repr(value).cast<std::string>()),
                        "use nimbus.float32, nimbus.bfloat16, ..., a name such as 'float32', or a NumPy dtype");
}

py::dtype numpy_dtype_of(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kBF16: return py::dtype::of<float>();
    case DType::kF64: return py::dtype::of<double>();
    case DType::kF16: return py::dtype("float16");
    case DType::kI32: return py::dtype::of<int32_t>();
    case DType::kI64: return py::dtype::of<int64_t>();
    case DType::kU8: return py::dtype::of<uint8_t>();
    case DType::kBool: return py::dtype::of<bool>();
  }
  return py::dtype::of<float>();
}

Tensor to_tensor(const py::handle& value, const py::handle& dtype) {
  if (is_tensor(value) || is_variable(value)) {
    const Tensor& tensor = is_tensor(value) ? tensor_in(value) : value.cast<const Variable&>().value();
    if (!dtype.is_none() && dtype_from_python(dtype) != tensor.dtype()) {
      throw InvalidArgument(fmt::format("a {} tensor was given where {} was asked for", python_name(tensor.dtype()),
                                        python_name(dtype_from_python(dtype))),
                            "convert it with nimbus.cast(tensor, dtype)");
    }
    return tensor;
  }
  const std::optional<DType> requested =
      dtype.is_none() ? std::nullopt : std::optional<DType>(dtype_from_python(dtype));
  if (py::isinstance<py::array>(value)) {
    return placed(tensor_of_array(py::reinterpret_borrow<py::array>(value), requested));
  }
  return placed(tensor_of_array(array_of_python_value(value, requested), requested));
}

bool is_tensor(const py::handle& value) { return PyObject_TypeCheck(value.ptr(), python_type_of_tensor()); }

namespace {
const py::detail::type_info* tensor_type_info() {
  static const py::detail::type_info* info = py::detail::get_type_info(typeid(Tensor));
  return info;
}
}  // namespace

const Tensor& tensor_in(const py::handle& value) {
  auto* instance = reinterpret_cast<py::detail::instance*>(value.ptr());
  return *static_cast<const Tensor*>(instance->get_value_and_holder(tensor_type_info()).value_ptr());
}

py::object python_tensor(Tensor tensor) {
  const auto move = [](const void* source) -> void* {
    return new Tensor(std::move(*static_cast<Tensor*>(const_cast<void*>(source))));
  };
  return py::reinterpret_steal<py::object>(py::detail::type_caster_generic::cast(
      &tensor, py::return_value_policy::move, py::handle(), tensor_type_info(), nullptr, move));
}
bool is_variable(const py::handle& value) { return PyObject_TypeCheck(value.ptr(), python_type_of_variable()); }

bool is_tensor_value(const py::handle& value) {
  return is_tensor(value) || is_variable(value) || PyFloat_Check(value.ptr()) || PyLong_Check(value.ptr()) ||
         PyList_Check(value.ptr()) || PyTuple_Check(value.ptr()) || py::isinstance<py::array>(value) ||
         PyObject_IsInstance(value.ptr(), numpy_scalar_type()) == 1;
}

Tensor operand_like(const py::handle& value, const Tensor& like) {
  if (is_tensor(value)) return tensor_in(value);
  if (is_variable(value)) return value.cast<const Variable&>().value();
  if (PyFloat_Check(value.ptr()) || PyLong_Check(value.ptr())) {
    return scalar_of_python_number(value, like.dtype(), like.device());
  }
  return to_tensor(value, py::cast(like.dtype()));
}

py::array tensor_to_numpy(const Tensor& tensor) {
  if (tensor.is_symbolic()) {
    throw InvalidArgument(
        fmt::format("a symbolic tensor (shape {}) has no value: it stands for a value inside nimbus.function",
                    tensor.shape().to_string()),
        "return it from the function and read the result, or call the function's body without @nimbus.function");
  }
  const Tensor host = tensor.dtype() == DType::kBF16 ? tensor.to(DType::kF32) : detail::host_copy(tensor);
  std::vector<py::ssize_t> dims(host.shape().dims().begin(), host.shape().dims().end());
  auto* owner = new Tensor(host);
  const py::capsule keep_alive(owner, [](void* tensor) { delete static_cast<Tensor*>(tensor); });
  py::array array(numpy_dtype_of(tensor.dtype()), dims, host.raw_data(), keep_alive);
  make_read_only(array);
  return array;
}

void bind_tensor(py::module_& m) {
  py::enum_<DType> dtype(m, "DType");
  for (const auto& [each, name] : kPythonNames) dtype.value(name, each);
  dtype.def_property_readonly("size", [](DType d) { return dtype_size(d); })
      .def_property_readonly("is_floating", [](DType d) { return is_floating(d); })
      .def_property_readonly("is_integer", [](DType d) { return is_integral(d); })
      .def_property_readonly("is_bool", [](DType d) { return d == DType::kBool; })
      .def_property_readonly("as_numpy_dtype", [](DType d) { return numpy_dtype_of(d).attr("type"); });
  m.def("as_dtype", &dtype_from_python, py::arg("type_value"));

  py::class_<Tensor>(m, "Tensor")
      // A Dataset.map being traced has dimensions unknown until run time: -1 there (None in Python).
      .def_property_readonly("_shape", [](const Tensor& t) { return py::tuple(py::cast(data::traced_shape(t))); })
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("ndim", &Tensor::rank)
      .def_property_readonly("device", [](const Tensor& t) { return tensorflow_device_name(t.device()); })
      .def("numpy", &tensor_to_numpy)
      .def(
          "__array__",
          [](const Tensor& t, const py::object& dtype) {
            py::array array = tensor_to_numpy(t);
            return dtype.is_none() ? array : py::array(array.attr("astype")(dtype));
          },
          py::arg("dtype") = py::none())
      .def("__len__",
           [](const Tensor& t) {
             if (t.rank() == 0) throw InvalidArgument("len() of a scalar tensor", "use tensor.shape");
             return t.dim(0);
           })
      .def("__repr__", [](const Tensor& t) { return tensor_text(t, true); })
      .def("__str__", [](const Tensor& t) { return tensor_text(t, false); });

  py::class_<Variable>(m, "Variable")
      .def(py::init(
               [](const py::object& initial_value, bool trainable, const py::object& name, const py::object& dtype) {
                 // A copy: assign() writes in place, and must not write into the caller's array.
                 const Tensor initial = to_tensor(initial_value, dtype).clone();
                 return Variable(initial, name.is_none() ? "Variable" : name.cast<std::string>(), trainable);
               }),
           py::arg("initial_value"), py::arg("trainable") = true, py::arg("name") = py::none(),
           py::arg("dtype") = py::none())
      .def_property_readonly("name", &Variable::name)
      .def_property_readonly("trainable", &Variable::trainable)
      .def_property_readonly("_shape", [](const Variable& v) { return shape_tuple(v.shape()); })
      .def_property_readonly("dtype", &Variable::dtype)
      .def("value", &Variable::value)
      .def("read_value", &Variable::value)
      .def("numpy", [](const Variable& v) { return py::array(tensor_to_numpy(v.value()).attr("copy")()); })
      .def(
          "assign", [](Variable& v, const py::object& value) { v.assign(to_tensor(value, py::cast(v.dtype()))); },
          py::arg("value"))
      .def(
          "assign_add",
          [](Variable& v, const py::object& delta) { v.assign_add(to_tensor(delta, py::cast(v.dtype()))); },
          py::arg("delta"))
      .def(
          "assign_sub",
          [](Variable& v, const py::object& delta) { v.assign_sub(to_tensor(delta, py::cast(v.dtype()))); },
          py::arg("delta"))
      .def("__repr__", [](const Variable& v) {
        return fmt::format("<nimbus.Variable '{}' shape={} dtype={}, numpy={}>", v.name(), shape_text(v.shape()),
                           python_name(v.dtype()), py::repr(tensor_to_numpy(v.value())).cast<std::string>());
      });

  m.def(
      "constant",
      [](const py::object& value, const py::object& dtype, const py::object& shape, const py::object&) {
        const Tensor tensor = to_tensor(value, dtype);
        if (shape.is_none()) return tensor;
        // TensorFlow's constant(value, shape=...): one value fills the shape, more are reshaped to it.
        const Shape target(shape.cast<std::vector<int64_t>>());
        if (tensor.numel() == 1 && target.numel() != 1) return broadcast_to(reshape(tensor, Shape{}), target);
        if (tensor.numel() != target.numel()) {
          throw InvalidArgument(
              fmt::format("constant: {} values do not fill shape {}", tensor.numel(), target.to_string()),
              "give one value, or as many as the shape holds");
        }
        return reshape(tensor, target);
      },
      py::arg("value"), py::arg("dtype") = py::none(), py::arg("shape") = py::none(), py::arg("name") = py::none());
}

}  // namespace nimbus::python
