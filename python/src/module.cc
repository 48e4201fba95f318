// nimbus._nimbus: the C++ engine's API for the pure-Python package python/nimbus.

#include "bindings.h"

PYBIND11_MODULE(_nimbus, m) {
  m.doc() = "The Nimbus engine's Python bindings; import nimbus, not this module.";
  nimbus::python::bind_errors(m);
  nimbus::python::bind_tensor(m);
  nimbus::python::bind_operators(m);
  nimbus::python::bind_ops(m);
  nimbus::python::bind_dlpack(m);
  nimbus::python::bind_models(m);
  nimbus::python::bind_autodiff(m);
  nimbus::python::bind_function(m);
  nimbus::python::bind_config(m);
  nimbus::python::bind_optimizers(m);
  nimbus::python::bind_losses_metrics(m);
  nimbus::python::bind_callbacks(m);
  nimbus::python::bind_training(m);
  nimbus::python::bind_devices(m);
  nimbus::python::bind_distribute(m);
  nimbus::python::bind_dataset(m);
  nimbus::python::bind_data_ops(m);
}
