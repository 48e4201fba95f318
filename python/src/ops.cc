// The engine's ops under TensorFlow's names and arguments (tf.add, tf.reduce_sum(input_tensor, axis,
// keepdims), tf.nn.conv2d(input, filters, strides, padding), ...), each bound straight to its C++ op
// function so that an eager call costs one pybind11 call and one op dispatch. Tensor arguments accept
// what convert_to_tensor accepts; the second operand of a binary op takes the first's dtype when it is
// a Python number or array, as in TensorFlow. Ops made of several engine ops, and those whose
// arguments are simpler to map in Python, are in python/nimbus/{math,nn,linalg,image,random}.py.
// Every op records on an active GradientTape and traces inside nimbus.function, as C++ calls do.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <numeric>

#include "bindings.h"
#include "nimbus/base/error.h"
#include "nimbus/base/rng.h"
#include "nimbus/data/element_function.h"
#include "nimbus/data/image_ops.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus::python {
namespace {

// Every TensorFlow op takes a `name`; Nimbus names nothing, so it is accepted and unused.
py::arg_v name_arg() { return py::arg("name") = py::none(); }

// A Python number, NumPy scalar or scalar tensor as a double / an integer (through __float__ / __index__).
double double_of(const py::handle& value) {
  const double number = PyFloat_AsDouble(value.ptr());
  if (number == -1.0 && PyErr_Occurred()) throw py::error_already_set();
  return number;
}
int64_t int_of(const py::handle& value) {
  const Py_ssize_t number = PyNumber_AsSsize_t(value.ptr(), PyExc_OverflowError);
  if (number == -1 && PyErr_Occurred()) throw py::error_already_set();
  return number;
}

// Integers from a Python int, a sequence of ints (NumPy ints and scalar tensors included) or an integer
// tensor: axes, shapes, strides. `what` names the argument in errors.
std::vector<int64_t> ints_of(const py::handle& value, const char* what) {
  if (PyLong_Check(value.ptr())) return {value.cast<int64_t>()};
  const py::object values = is_tensor_value(value) && !PyList_Check(value.ptr()) && !PyTuple_Check(value.ptr())
                                ? py::object(tensor_to_numpy(to_tensor(value)).attr("tolist")())
                                : py::reinterpret_borrow<py::object>(value);
  if (PyLong_Check(values.ptr())) return {values.cast<int64_t>()};
  if (!py::isinstance<py::sequence>(values)) {
    throw InvalidArgument(
        fmt::format("{} must be an int or a list of ints, not {}", what, py::repr(value).cast<std::string>()),
        "pass e.g. 1 or [1, 2]");
  }
  std::vector<int64_t> ints;
  for (const py::handle item : values) {
    if (item.is_none()) {
      throw InvalidArgument(fmt::format("{} {} has an unknown (None) entry", what, py::repr(value).cast<std::string>()),
                            "give every dimension a size; -1 in a reshape stands for the rest");
    }
    ints.push_back(int_of(item));
  }
  return ints;
}

// TensorFlow's `axis` of a reduction: None reduces every axis (the engine's empty list).
std::vector<int64_t> axes_of(const py::handle& axis) {
  return axis.is_none() ? std::vector<int64_t>{} : ints_of(axis, "axis");
}

// An empty axis list reduces nothing in TensorFlow, but every axis in the engine.
bool reduces_nothing(const py::handle& axis) {
  return (PyList_Check(axis.ptr()) || PyTuple_Check(axis.ptr())) && py::len(axis) == 0;
}

using Reduction = Tensor (*)(const Tensor&, const std::vector<int64_t>&, bool);

template <Reduction reduce>
Tensor reduce_with_tf_axis(const py::handle& input, const py::handle& axis, bool keepdims, const py::handle&) {
  const Tensor x = to_tensor(input);
  return reduces_nothing(axis) ? x : reduce(x, axes_of(axis), keepdims);
}

using BinaryOp = Tensor (*)(const Tensor&, const Tensor&);
using UnaryOp = Tensor (*)(const Tensor&);

// The dtype comes from whichever operand is a tensor (the first when both are); the other converts to it.
template <BinaryOp op>
py::object binary(const py::handle& x, const py::handle& y, const py::handle&) {
  if ((is_tensor(y) || is_variable(y)) && !(is_tensor(x) || is_variable(x))) {
    const Tensor b = to_tensor(y);
    return python_tensor(op(operand_like(x, b), b));
  }
  const Tensor a = to_tensor(x);
  return python_tensor(op(a, operand_like(y, a)));
}

template <UnaryOp op>
py::object unary(const py::handle& x, const py::handle&) {
  return python_tensor(op(to_tensor(x)));
}

// "SAME" / "VALID" (TensorFlow's spelling) as the engine's "same" / "valid".
std::string padding_of(const py::handle& padding) {
  if (!py::isinstance<py::str>(padding)) {
    throw Unimplemented(fmt::format("explicit paddings {} are not supported", py::repr(padding).cast<std::string>()),
                        "use padding='SAME' or 'VALID', or nimbus.pad the input first");
  }
  std::string text = padding.cast<std::string>();
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// Strides, window sizes or dilations of a 2-D op: an int, 2 values, or 4 in data_format's order
// (TensorFlow's forms).
std::array<int64_t, 2> spatial_pair(const py::handle& value, const std::string& data_format, const char* what) {
  const std::vector<int64_t> values = ints_of(value, what);
  if (values.size() == 1) return {values[0], values[0]};
  if (values.size() == 2) return {values[0], values[1]};
  if (values.size() == 4)
    return data_format == "NCHW" ? std::array{values[2], values[3]} : std::array{values[1], values[2]};
  throw InvalidArgument(fmt::format("{} has {} values", what, values.size()), "give 1, 2 or 4 values");
}

// A list of tensors from a Python sequence of tensor values.
std::vector<Tensor> tensors_of(const py::handle& values, const char* what) {
  if (!py::isinstance<py::sequence>(values) || is_tensor(values)) {
    throw InvalidArgument(fmt::format("{} must be a list of tensors", what), "pass a list, e.g. [a, b]");
  }
  std::vector<Tensor> tensors;
  for (const py::handle value : values) tensors.push_back(to_tensor(value));
  return tensors;
}

// TensorFlow's range: range(limit) or range(start, limit, delta); int32 unless an argument is a float.
Tensor tf_range(const py::handle& start, const py::handle& limit, const py::handle& delta, const py::handle& dtype,
                const py::handle&) {
  const bool from_zero = limit.is_none();
  const double first = from_zero ? 0 : double_of(start);
  const double last = double_of(from_zero ? start : limit);
  const double step = double_of(delta);
  const auto is_float = [](const py::handle& v) {
    return PyFloat_Check(v.ptr()) || (is_tensor(v) && is_floating(tensor_in(v).dtype()));
  };
  const DType type = !dtype.is_none()                                        ? dtype_from_python(dtype)
                     : is_float(start) || is_float(limit) || is_float(delta) ? DType::kF32
                                                                             : DType::kI32;
  return placed(arange(first, last, step, type));
}

// TensorFlow's one_hot: the one-hot axis may be any, on and off values default to 1 and 0 in dtype
// (float32 unless on_value or off_value says otherwise).
Tensor tf_one_hot(const py::handle& indices, int64_t depth, const py::handle& on_value, const py::handle& off_value,
                  const py::handle& axis, const py::handle& dtype, const py::handle&) {
  DType type = DType::kF32;
  if (!dtype.is_none()) {
    type = dtype_from_python(dtype);
  } else if (!on_value.is_none() || !off_value.is_none()) {
    type = to_tensor(on_value.is_none() ? off_value : on_value).dtype();
  }
  const auto number = [](const py::handle& v, double fallback) { return v.is_none() ? fallback : double_of(v); };
  const Tensor ids = to_tensor(indices);
  Tensor hot = one_hot(ids, depth, type, number(on_value, 1), number(off_value, 0));
  const int64_t rank = hot.rank();
  int64_t where = axis.is_none() ? -1 : axis.cast<int64_t>();
  if (where == -1 || where == rank - 1) return hot;
  if (where < 0 || where >= rank) {
    throw InvalidArgument(fmt::format("one_hot: axis {} is outside [-1, {}]", where, rank - 1),
                          "pass -1 (last) or an axis of the output");
  }
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < rank - 1; ++i) {
    if (i == where) perm.push_back(rank - 1);
    perm.push_back(i);
  }
  return transpose(hot, perm);
}

// Logits of any rank (..., C) with labels (...), as TensorFlow allows; the engine's loss takes (N, C).
Tensor tf_sparse_softmax_cross_entropy(const py::handle& labels, const py::handle& logits, const py::handle&) {
  const Tensor x = to_tensor(logits);
  const Tensor y = to_tensor(labels);
  if (x.rank() == 2) return sparse_softmax_cross_entropy(x, y);
  if (x.rank() == 0 || y.rank() != x.rank() - 1) {
    throw InvalidArgument(fmt::format("sparse_softmax_cross_entropy_with_logits: logits {} and labels {} do not match",
                                      x.shape().to_string(), y.shape().to_string()),
                          "logits are (..., classes) and labels (...), one class id per row");
  }
  const Tensor losses = sparse_softmax_cross_entropy(reshape(x, std::vector<int64_t>{-1, x.dim(x.rank() - 1)}),
                                                     reshape(y, std::vector<int64_t>{-1}));
  return reshape(losses, y.shape());
}

Tensor tf_softmax_cross_entropy(const py::handle& labels, const py::handle& logits, int64_t axis, const py::handle&) {
  const Tensor x = to_tensor(logits);
  const Tensor y = operand_like(labels, x);
  if (axis != -1 && axis != x.rank() - 1) {
    throw Unimplemented(fmt::format("softmax_cross_entropy_with_logits: axis {} (only the last axis)", axis),
                        "nimbus.transpose the class axis to the end first");
  }
  if (x.rank() == 2) return softmax_cross_entropy(x, y);
  const std::vector<int64_t> rows{-1, x.rank() == 0 ? 1 : x.dim(x.rank() - 1)};
  const Tensor losses = softmax_cross_entropy(reshape(x, rows), reshape(y, rows));
  std::vector<int64_t> batch(x.shape().dims().begin(), x.shape().dims().end() - 1);
  return reshape(losses, batch);
}

Tensor tf_conv2d(const py::handle& input, const py::handle& filters, const py::handle& strides,
                 const py::handle& padding, const std::string& data_format, const py::handle& dilations,
                 const py::handle&) {
  Conv2dOptions options{.strides = spatial_pair(strides, data_format, "strides"),
                        .padding = padding_of(padding),
                        .data_format = data_format};
  if (!dilations.is_none()) options.dilations = spatial_pair(dilations, data_format, "dilations");
  const Tensor x = to_tensor(input);
  return conv2d(x, operand_like(filters, x), options);
}

template <Tensor (*pool)(const Tensor&, const Pool2dOptions&)>
Tensor tf_pool2d(const py::handle& input, const py::handle& ksize, const py::handle& strides, const py::handle& padding,
                 const std::string& data_format, const py::handle&) {
  return pool(to_tensor(input), {.pool_size = spatial_pair(ksize, data_format, "ksize"),
                                 .strides = spatial_pair(strides, data_format, "strides"),
                                 .padding = padding_of(padding),
                                 .data_format = data_format});
}

std::vector<Tensor> tf_split(const py::handle& value, const py::handle& num_or_size_splits, int64_t axis,
                             const py::handle&, const py::handle&) {
  const Tensor x = to_tensor(value);
  if (!PyLong_Check(num_or_size_splits.ptr())) return split(x, ints_of(num_or_size_splits, "num_or_size_splits"), axis);
  const int64_t pieces = num_or_size_splits.cast<int64_t>();
  const int64_t length = x.rank() == 0 ? 0 : x.dim(static_cast<int>(axis < 0 ? axis + x.rank() : axis));
  if (pieces <= 0 || length % pieces != 0) {
    throw InvalidArgument(
        fmt::format("split: {} pieces of axis {} of shape {} (length {})", pieces, axis, x.shape().to_string(), length),
        "the number of pieces must divide the axis; or pass the pieces' sizes as a list");
  }
  return split(x, std::vector<int64_t>(static_cast<size_t>(pieces), length / pieces), axis);
}

Tensor tf_pad(const py::handle& tensor, const py::handle& paddings, const std::string& mode, double constant_values,
              const py::handle&) {
  std::string upper = mode;
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  if (upper != "CONSTANT") {
    throw Unimplemented(fmt::format("pad mode {} (the engine pads with a constant only)", mode), "use mode='CONSTANT'");
  }
  const std::vector<int64_t> flat = ints_of(py::module_::import("numpy").attr("ravel")(paddings), "paddings");
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (size_t i = 0; i + 1 < flat.size(); i += 2) pairs.emplace_back(flat[i], flat[i + 1]);
  return pad(to_tensor(tensor), pairs, constant_values);
}

Tensor tf_gather(const py::handle& params, const py::handle& indices, const py::handle&, const py::handle& axis,
                 int64_t batch_dims, const py::handle&) {
  if (batch_dims != 0) {
    throw Unimplemented(fmt::format("gather with batch_dims={} (only 0)", batch_dims),
                        "reshape so that the batch axes are part of params' gathered axis");
  }
  return gather(to_tensor(params), to_tensor(indices), axis.is_none() ? 0 : axis.cast<int64_t>());
}

Tensor tf_where(const py::handle& condition, const py::handle& x, const py::handle& y, const py::handle&) {
  if (x.is_none() || y.is_none()) {
    throw Unimplemented("where(condition) without x and y: the indices of true elements have a data-dependent shape",
                        "use np.argwhere(condition.numpy()), or where(condition, x, y)");
  }
  const Tensor cond = to_tensor(condition);
  const bool x_leads = is_tensor(x) || is_variable(x) || !(is_tensor(y) || is_variable(y));
  const Tensor a = x_leads ? to_tensor(x) : operand_like(x, to_tensor(y));
  return where(cond, a, operand_like(y, a));
}

Tensor tf_clip_by_value(const py::handle& t, const py::handle& low, const py::handle& high, const py::handle&) {
  const Tensor x = to_tensor(t);
  const auto is_number = [](const py::handle& v) { return PyFloat_Check(v.ptr()) || PyLong_Check(v.ptr()); };
  if (is_number(low) && is_number(high)) return clip(x, double_of(low), double_of(high));
  return minimum(maximum(x, operand_like(low, x)), operand_like(high, x));
}

py::tuple tf_top_k(const py::handle& input, int64_t k, bool sorted, const py::handle&) {
  if (!sorted) throw Unimplemented("top_k(sorted=False)", "leave sorted=True: the engine always sorts");
  auto [values, indices] = top_k(to_tensor(input), k);
  return py::make_tuple(values, cast(indices, DType::kI32));  // TensorFlow's indices are int32
}

// tf.linalg.band_part: keep num_lower diagonals below and num_upper above the main one (-1: all).
Tensor tf_band_part(const py::handle& input, int64_t num_lower, int64_t num_upper, const py::handle&) {
  Tensor x = to_tensor(input);
  if (num_lower >= 0) x = triu(x, -num_lower);
  if (num_upper >= 0) x = tril(x, num_upper);
  return x;
}

Tensor tf_add_n(const py::handle& inputs, const py::handle&) {
  const std::vector<Tensor> tensors = tensors_of(inputs, "add_n's inputs");
  if (tensors.empty()) throw InvalidArgument("add_n of an empty list", "pass at least one tensor");
  Tensor total = tensors[0];
  for (size_t i = 1; i < tensors.size(); ++i) total = add(total, tensors[i]);
  return total;
}

// The generator a random op draws from: a nimbus.random seed's own, or the process-wide one.
Generator* generator_of(const py::handle& generator) {
  return generator.is_none() ? nullptr : &generator.cast<Generator&>();
}

void bind_math(py::module_& m) {
  const auto x = py::arg("x");
  const auto y = py::arg("y");
  const auto binary_op = [&](const char* name, auto fn) { m.def(name, fn, x, y, name_arg()); };
  binary_op("add", binary<add>);
  binary_op("subtract", binary<sub>);
  binary_op("multiply", binary<mul>);
  binary_op("divide", binary<true_divide>);
  binary_op("truediv", binary<true_divide>);
  binary_op("pow", binary<pow>);
  binary_op("maximum", binary<maximum>);
  binary_op("minimum", binary<minimum>);
  binary_op("equal", binary<equal>);
  binary_op("not_equal", binary<not_equal>);
  binary_op("less", binary<less>);
  binary_op("less_equal", binary<less_equal>);
  binary_op("greater", binary<greater>);
  binary_op("greater_equal", binary<greater_equal>);
  binary_op("logical_and", binary<logical_and>);
  binary_op("logical_or", binary<logical_or>);

  const auto unary_op = [&](const char* name, auto fn) { m.def(name, fn, x, name_arg()); };
  unary_op("negative", unary<neg>);
  unary_op("exp", unary<exp>);
  unary_op("log", unary<log>);
  unary_op("sqrt", unary<sqrt>);
  unary_op("rsqrt", unary<rsqrt>);
  unary_op("abs", unary<abs>);
  unary_op("sign", unary<sign>);
  unary_op("square", unary<square>);
  unary_op("sin", unary<sin>);
  unary_op("cos", unary<cos>);
  unary_op("erf", unary<erf>);
  unary_op("is_finite", unary<isfinite>);
  unary_op("logical_not", unary<logical_not>);
  unary_op("sigmoid", unary<sigmoid>);
  unary_op("tanh", unary<tanh>);
  unary_op("softplus", unary<softplus>);
  unary_op("relu", unary<relu>);
  m.def(
      "stop_gradient", [](const py::handle& input, const py::handle&) { return stop_gradient(to_tensor(input)); },
      py::arg("input"), name_arg());
  m.def(
      "identity", [](const py::handle& input, const py::handle&) { return to_tensor(input).clone(); }, py::arg("input"),
      name_arg());
  m.def(
      "gelu",
      [](const py::handle& features, bool approximate, const py::handle&) {
        return gelu(to_tensor(features), approximate ? "tanh" : "none");
      },
      py::arg("features"), py::arg("approximate") = false, name_arg());
  m.def(
      "cast",
      [](const py::handle& value, const py::handle& dtype, const py::handle&) {
        const Tensor t = to_tensor(value);
        return t.to(dtype_from_python(dtype));
      },
      py::arg("x"), py::arg("dtype"), name_arg());
  m.def(
      "matmul",
      [](const py::handle& a, const py::handle& b, bool transpose_a, bool transpose_b, const py::handle&) {
        const Tensor left = to_tensor(a);
        return python_tensor(matmul(left, operand_like(b, left), transpose_a, transpose_b));
      },
      py::arg("a"), py::arg("b"), py::arg("transpose_a") = false, py::arg("transpose_b") = false, name_arg());
  m.def("clip_by_value", &tf_clip_by_value, py::arg("t"), py::arg("clip_value_min"), py::arg("clip_value_max"),
        name_arg());
  m.def("where", &tf_where, py::arg("condition"), py::arg("x") = py::none(), py::arg("y") = py::none(), name_arg());
  m.def("add_n", &tf_add_n, py::arg("inputs"), name_arg());

  const auto reduction = [&](const char* name, auto fn) {
    m.def(name, fn, py::arg("input_tensor"), py::arg("axis") = py::none(), py::arg("keepdims") = false, name_arg());
  };
  reduction("reduce_sum", reduce_with_tf_axis<sum>);
  reduction("reduce_mean", reduce_with_tf_axis<mean>);
  reduction("reduce_max", reduce_with_tf_axis<reduce_max>);
  reduction("reduce_min", reduce_with_tf_axis<reduce_min>);
  reduction("reduce_variance", reduce_with_tf_axis<variance>);
  m.def(
      "argmax",
      [](const py::handle& input, const py::handle& axis, const py::handle& output_type, const py::handle&) {
        const Tensor index = argmax(to_tensor(input), axis.is_none() ? 0 : axis.cast<int64_t>());
        return index.to(dtype_from_python(output_type));
      },
      py::arg("input"), py::arg("axis") = py::none(), py::arg("output_type") = DType::kI64, name_arg());
  m.def(
      "softmax",
      [](const py::handle& logits, const py::handle& axis, const py::handle&) {
        return softmax(to_tensor(logits), axis.is_none() ? -1 : axis.cast<int64_t>());
      },
      py::arg("logits"), py::arg("axis") = py::none(), name_arg());
  m.def(
      "log_softmax",
      [](const py::handle& logits, const py::handle& axis, const py::handle&) {
        return log_softmax(to_tensor(logits), axis.is_none() ? -1 : axis.cast<int64_t>());
      },
      py::arg("logits"), py::arg("axis") = py::none(), name_arg());
  m.def(
      "unsorted_segment_sum",
      [](const py::handle& data, const py::handle& segment_ids, int64_t num_segments, const py::handle&) {
        return segment_sum(to_tensor(data), to_tensor(segment_ids), num_segments);
      },
      py::arg("data"), py::arg("segment_ids"), py::arg("num_segments"), name_arg());
  m.def("top_k", &tf_top_k, py::arg("input"), py::arg("k") = 1, py::arg("sorted") = true, name_arg());
  m.def("band_part", &tf_band_part, py::arg("input"), py::arg("num_lower"), py::arg("num_upper"), name_arg());
}

void bind_shape_ops(py::module_& m) {
  m.def(
      "reshape",
      [](const py::handle& tensor, const py::handle& shape, const py::handle&) {
        const Tensor x = to_tensor(tensor);
        const std::vector<int64_t> dims = ints_of(shape, "shape");
        return data::tracing_element_function() ? dataset_reshape(x, dims) : reshape(x, dims);
      },
      py::arg("tensor"), py::arg("shape"), name_arg());
  m.def(
      "transpose",
      [](const py::handle& a, const py::handle& perm, bool, const py::handle&) {
        const Tensor x = to_tensor(a);
        std::vector<int64_t> order(static_cast<size_t>(x.rank()));
        if (perm.is_none()) {
          std::iota(order.rbegin(), order.rend(), 0);  // TensorFlow's default reverses the axes
        } else {
          order = ints_of(perm, "perm");
        }
        return transpose(x, order);
      },
      py::arg("a"), py::arg("perm") = py::none(), py::arg("conjugate") = false, name_arg());
  m.def(
      "matrix_transpose", [](const py::handle& a, const py::handle&) { return matrix_transpose(to_tensor(a)); },
      py::arg("a"), name_arg());
  m.def(
      "expand_dims",
      [](const py::handle& input, int64_t axis, const py::handle&) { return expand_dims(to_tensor(input), axis); },
      py::arg("input"), py::arg("axis"), name_arg());
  m.def(
      "squeeze",
      [](const py::handle& input, const py::handle& axis, const py::handle&) {
        return squeeze(to_tensor(input), axes_of(axis));
      },
      py::arg("input"), py::arg("axis") = py::none(), name_arg());
  m.def(
      "concat",
      [](const py::handle& values, int64_t axis, const py::handle&) {
        return concat(tensors_of(values, "concat's values"), axis);
      },
      py::arg("values"), py::arg("axis"), name_arg());
  m.def("split", &tf_split, py::arg("value"), py::arg("num_or_size_splits"), py::arg("axis") = 0,
        py::arg("num") = py::none(), name_arg());
  m.def(
      "slice",
      [](const py::handle& input, const py::handle& begin, const py::handle& size, const py::handle&) {
        return slice(to_tensor(input), ints_of(begin, "begin"), ints_of(size, "size"));
      },
      py::arg("input_"), py::arg("begin"), py::arg("size"), name_arg());
  m.def("pad", &tf_pad, py::arg("tensor"), py::arg("paddings"), py::arg("mode") = "CONSTANT",
        py::arg("constant_values") = 0.0, name_arg());
  m.def("gather", &tf_gather, py::arg("params"), py::arg("indices"), py::arg("validate_indices") = py::none(),
        py::arg("axis") = py::none(), py::arg("batch_dims") = 0, name_arg());
  m.def("one_hot", &tf_one_hot, py::arg("indices"), py::arg("depth"), py::arg("on_value") = py::none(),
        py::arg("off_value") = py::none(), py::arg("axis") = py::none(), py::arg("dtype") = py::none(), name_arg());
  m.def(
      "broadcast_to",
      [](const py::handle& input, const py::handle& shape, const py::handle&) {
        return broadcast_to(to_tensor(input), Shape(ints_of(shape, "shape")));
      },
      py::arg("input"), py::arg("shape"), name_arg());
}

void bind_creation(py::module_& m) {
  m.def(
      "zeros",
      [](const py::handle& shape, const py::handle& dtype, const py::handle&) {
        return placed(zeros(Shape(ints_of(shape, "shape")), dtype_from_python(dtype)));
      },
      py::arg("shape"), py::arg("dtype") = DType::kF32, name_arg());
  m.def(
      "ones",
      [](const py::handle& shape, const py::handle& dtype, const py::handle&) {
        return placed(ones(Shape(ints_of(shape, "shape")), dtype_from_python(dtype)));
      },
      py::arg("shape"), py::arg("dtype") = DType::kF32, name_arg());
  const auto filled_like = [](double value) {
    return [value](const py::handle& input, const py::handle& dtype, const py::handle&) {
      const Tensor like = to_tensor(input);
      return full(like.shape(), value, dtype.is_none() ? like.dtype() : dtype_from_python(dtype), like.device());
    };
  };
  m.def("zeros_like", filled_like(0), py::arg("input"), py::arg("dtype") = py::none(), name_arg());
  m.def("ones_like", filled_like(1), py::arg("input"), py::arg("dtype") = py::none(), name_arg());
  m.def(
      "fill",
      [](const py::handle& dims, const py::handle& value, const py::handle&) {
        return broadcast_to(to_tensor(value), Shape(ints_of(dims, "dims")));
      },
      py::arg("dims"), py::arg("value"), name_arg());
  m.def("range", &tf_range, py::arg("start"), py::arg("limit") = py::none(), py::arg("delta") = 1,
        py::arg("dtype") = py::none(), name_arg());
}

void bind_nn(py::module_& m) {
  m.def("sparse_softmax_cross_entropy_with_logits", &tf_sparse_softmax_cross_entropy, py::kw_only(), py::arg("labels"),
        py::arg("logits"), name_arg());
  m.def("softmax_cross_entropy_with_logits", &tf_softmax_cross_entropy, py::kw_only(), py::arg("labels"),
        py::arg("logits"), py::arg("axis") = -1, name_arg());
  m.def("conv2d", &tf_conv2d, py::arg("input"), py::arg("filters"), py::arg("strides"), py::arg("padding"),
        py::arg("data_format") = "NHWC", py::arg("dilations") = py::none(), name_arg());
  m.def("max_pool2d", &tf_pool2d<max_pool2d>, py::arg("input"), py::arg("ksize"), py::arg("strides"),
        py::arg("padding"), py::arg("data_format") = "NHWC", name_arg());
  m.def("avg_pool2d", &tf_pool2d<avg_pool2d>, py::arg("input"), py::arg("ksize"), py::arg("strides"),
        py::arg("padding"), py::arg("data_format") = "NHWC", name_arg());
  m.def(
      "_dropout",
      [](const py::handle& x, double rate, const py::handle& generator) {
        return dropout(to_tensor(x), rate, generator_of(generator));
      },
      py::arg("x"), py::arg("rate"), py::arg("generator"));
}

// random_normal (a, b: mean and stddev) or random_uniform (a, b: low and high).
template <Tensor (*draw)(const Shape&, double, double, DType, Device, Generator*)>
Tensor tf_random(const py::handle& shape, double a, double b, const py::handle& dtype, const py::handle& generator) {
  return placed(
      draw(Shape(ints_of(shape, "shape")), a, b, dtype_from_python(dtype), Device::cpu(), generator_of(generator)));
}

void bind_random(py::module_& m) {
  // A seed's own stream of random numbers (nimbus.random keeps one per op-level seed).
  py::class_<Generator>(m, "_Generator").def(py::init<uint64_t>(), py::arg("seed"));
  m.def("_manual_seed", &manual_seed, py::arg("seed"));
  m.def("_random_normal", &tf_random<random_normal>, py::arg("shape"), py::arg("mean"), py::arg("stddev"),
        py::arg("dtype"), py::arg("generator"));
  m.def("_random_uniform", &tf_random<random_uniform>, py::arg("shape"), py::arg("low"), py::arg("high"),
        py::arg("dtype"), py::arg("generator"));
}

void bind_image(py::module_& m) {
  m.def(
      "_resize_bilinear",
      [](const py::handle& image, int64_t height, int64_t width) {
        return data::resize_bilinear(to_tensor(image), height, width);
      },
      py::arg("image"), py::arg("height"), py::arg("width"));
}

}  // namespace

Tensor true_divide(const Tensor& a, const Tensor& b) {
  if (is_floating(a.dtype()) || a.dtype() != b.dtype()) return div(a, b);
  const DType wide = dtype_size(a.dtype()) >= 4 ? DType::kF64 : DType::kF32;
  return div(cast(a, wide), cast(b, wide));
}

void bind_ops(py::module_& m) {
  bind_math(m);
  bind_shape_ops(m);
  bind_creation(m);
  bind_nn(m);
  bind_random(m);
  bind_image(m);
}

}  // namespace nimbus::python
