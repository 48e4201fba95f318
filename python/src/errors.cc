// nimbus::Error becomes the exception class of nimbus.errors that TensorFlow raises for the same failure
// (python/nimbus/errors.py defines them, all deriving from OpError), carrying the message and the hint.
// Any other C++ exception becomes a Python exception too: none may terminate the interpreter.
#include <exception>
#include <new>

#include "bindings.h"
#include "nimbus/base/error.h"

namespace nimbus::python {
namespace {

const char* python_class_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "InvalidArgumentError";
    case ErrorKind::kOutOfMemory: return "ResourceExhaustedError";
    case ErrorKind::kDataError: return "DataLossError";
    case ErrorKind::kNotFound: return "NotFoundError";
    case ErrorKind::kUnavailable: return "UnavailableError";
    case ErrorKind::kUnimplemented: return "UnimplementedError";
    case ErrorKind::kInternal: return "InternalError";
  }
  return "UnknownError";
}

void raise_python_error(const Error& error) {
  const py::object errors = py::module_::import("nimbus.errors");
  const py::object instance = errors.attr(python_class_of(error.kind()))(error.message(), error.hint());
  PyErr_SetObject(instance.get_type().ptr(), instance.ptr());
}

}  // namespace

void bind_errors(py::module_& m) {
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const Error& error) {
      raise_python_error(error);
    } catch (const std::bad_alloc&) {
      raise_python_error(OutOfMemory("host memory exhausted (std::bad_alloc)"));
    }
  });
}

}  // namespace nimbus::python
