// The runtime's process-wide switches for python/nimbus/config.py: graph mode
// (tf.config.run_functions_eagerly), the JIT, i.e. fusion (tf.config.optimizer.set_jit), TF32 matmuls on
// CUDA (enable_tensor_float_32_execution) and the compute threads (set_intra_op_parallelism_threads).
#include <functional>

#include "bindings.h"
#include "nimbus/base/rng.h"
#include "nimbus/device/runtime.h"

namespace nimbus::python {
namespace {

// Changes one runtime option. configure_runtime reseeds the default generator whenever a seed is set,
// so the generator's stream is put back where it was: switching the JIT must not repeat random draws.
void update_runtime(const std::function<void(RuntimeOptions&)>& change) {
  RuntimeOptions options = runtime_options();
  change(options);
  Generator& generator = default_generator();
  const uint64_t seed = generator.seed(), offset = generator.offset();
  configure_runtime(options);
  generator.set_state(seed, offset);
}

}  // namespace

void bind_config(py::module_& m) {
  m.def("graph_mode", [] { return runtime_options().graph; });
  m.def(
      "set_graph_mode", [](bool graph) { update_runtime([&](RuntimeOptions& o) { o.graph = graph; }); },
      py::arg("graph"));
  m.def("jit", [] { return runtime_options().jit; });
  m.def(
      "set_jit", [](bool jit) { update_runtime([&](RuntimeOptions& o) { o.jit = jit; }); }, py::arg("jit"));
  m.def("allow_tf32", [] { return runtime_options().allow_tf32; });
  m.def(
      "set_allow_tf32", [](bool allow) { update_runtime([&](RuntimeOptions& o) { o.allow_tf32 = allow; }); },
      py::arg("allow"));
  // 0: every core.
  m.def("threads", [] { return runtime_options().threads; });
  m.def(
      "set_threads", [](int threads) { update_runtime([&](RuntimeOptions& o) { o.threads = threads; }); },
      py::arg("threads"));
}

}  // namespace nimbus::python
