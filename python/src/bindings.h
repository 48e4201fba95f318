// The pieces of the nimbus._nimbus extension, one per file, and the conversions they share.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // in every file: type casters must agree across the extension

#include "nimbus/base/dtype.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus::python {

namespace py = pybind11;

// Each adds its part of the API to the module (module.cc calls them in this order).
void bind_errors(py::module_& m);
void bind_tensor(py::module_& m);
void bind_models(py::module_& m);
void bind_optimizers(py::module_& m);
void bind_losses_metrics(py::module_& m);
void bind_callbacks(py::module_& m);
void bind_training(py::module_& m);
void bind_operators(py::module_& m);
void bind_ops(py::module_& m);
void bind_dlpack(py::module_& m);
void bind_autodiff(py::module_& m);
void bind_function(py::module_& m);
void bind_config(py::module_& m);
void bind_dataset(py::module_& m);
void bind_data_ops(py::module_& m);

// A dtype from what TensorFlow accepts: a nimbus DType, a name ("float32", "bfloat16", "f32"), a NumPy
// dtype or scalar type (np.float32). InvalidArgument names the value otherwise.
DType dtype_from_python(const py::handle& value);
// The NumPy dtype that holds a tensor of `dtype` (bfloat16, which NumPy lacks, is read as float32).
py::dtype numpy_dtype_of(DType dtype);

// A tensor from a Tensor, a Variable, a NumPy array, or Python numbers and nested lists (TensorFlow's
// convert_to_tensor). A C-contiguous NumPy array of a supported dtype is wrapped, not copied, when no
// other dtype is asked for; Python floats become float32 and ints int32, as in TensorFlow.
Tensor to_tensor(const py::handle& value, const py::handle& dtype = py::none());

// A Python object that C++ may copy, keep and drop without holding the GIL (a callable that fit,
// which runs without it, calls): the last owner takes the GIL to drop it.
std::shared_ptr<py::object> held_with_gil(py::object object);
// Whether a binary op takes `value` as an operand: a Tensor, a Variable, a Python number, a list or
// tuple, a NumPy array or NumPy scalar.
bool is_tensor_value(const py::handle& value);
// An operand of a binary op whose other operand is `like`: a Tensor or Variable as it is, anything
// else converted to `like`'s dtype (TensorFlow converts `x + 1` so).
Tensor operand_like(const py::handle& value, const Tensor& like);

// TensorFlow's `/` (tf.math.truediv): integers divide in floating point, int32 and int64 as float64,
// smaller ones as float32.
Tensor true_divide(const Tensor& a, const Tensor& b);
// Whether `value` is a nimbus.Tensor or a nimbus.Variable (or a subclass).
bool is_tensor(const py::handle& value);
bool is_variable(const py::handle& value);
// The Tensor inside a nimbus.Tensor object (is_tensor(value) must hold), and a new nimbus.Tensor
// object owning `tensor`. Both skip the type lookup by std::type_index that pybind11's casts make,
// a fair part of an eager op's cost from Python (bench/python/eager_overhead.py).
const Tensor& tensor_in(const py::handle& value);
py::object python_tensor(Tensor tensor);

// reshape inside a function Dataset.map traces: a tensor whose dimensions are known only per element
// is reshaped when the map runs (a -1 in `shape` resolved then), not at trace time (data_ops.cc).
Tensor dataset_reshape(const Tensor& tensor, const std::vector<int64_t>& shape);

// A NumPy array viewing a CPU tensor's memory (kept alive by the array), read-only; other devices copy.
py::array tensor_to_numpy(const Tensor& tensor);

// Devices and memory (devices.cc) and distribution strategies (distribute.cc), bound after bind_training.
void bind_devices(py::module_& m);
void bind_distribute(py::module_& m);
// TensorFlow's name of a device: "/job:localhost/replica:0/task:0/device:GPU:0".
std::string tensorflow_device_name(Device device);
// `tensor` on the device of the innermost nimbus.device scope on this thread: moved there when that is a
// GPU; as it is without a scope or under a CPU one (the CPU's logical devices share the host's memory).
Tensor placed(Tensor tensor);

}  // namespace nimbus::python
