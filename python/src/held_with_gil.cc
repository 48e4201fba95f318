// A Python object C++ may keep and drop on threads that do not hold the GIL (fit's, a traced function's,
// a tensor storage's last owner): the deleter takes the GIL to drop the reference.
#include "bindings.h"

namespace nimbus::python {

std::shared_ptr<py::object> held_with_gil(py::object object) {
  return {new py::object(std::move(object)), [](py::object* held) {
            if (!Py_IsInitialized()) return;  // the interpreter has gone, and its objects with it
            const py::gil_scoped_acquire gil;
            delete held;
          }};
}

}  // namespace nimbus::python
