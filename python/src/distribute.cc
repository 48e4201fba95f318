// Distribution strategies (distribute/strategy.h) for python/nimbus/distribute.py: the C++ strategy that
// fit's replicas run on (the trainer's), Python functions run on its replicas' threads (strategy.run),
// and the all-reduce and barrier of the replica the calling thread runs (ReplicaContext).
#include <fmt/format.h>

#include "bindings.h"
#include "nimbus/base/error.h"
#include "nimbus/distribute/multi_worker.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/ops/dispatch.h"

namespace nimbus::python {
namespace {

using distribute::Strategy;

distribute::ReduceOp reduce_op_of(const std::string& name) {
  if (name == "SUM") return distribute::ReduceOp::kSum;
  if (name == "MEAN") return distribute::ReduceOp::kMean;
  throw InvalidArgument(fmt::format("all_reduce: reduce op '{}'", name), "use ReduceOp.SUM or ReduceOp.MEAN");
}

// `value` summed (or averaged) over every replica in sync. The collectives carry float32, so other
// dtypes go through it (exact for integers up to 2^24).
Tensor replica_all_reduce(const py::handle& value, const std::string& op) {
  const Tensor tensor = to_tensor(value);
  const distribute::ReduceOp reduce = reduce_op_of(op);
  const distribute::ReplicaContext* replica = distribute::current_replica();
  if (replica == nullptr || replica->num_replicas == 1) return tensor;
  if (tensor.is_symbolic()) {
    throw Unimplemented("all_reduce inside a nimbus.function: the replicas meet eagerly",
                        "call all_reduce (and apply_gradients) outside the traced function");
  }
  std::vector<float> buffer = tensor.to(DType::kF32).to(Device::cpu()).to_vector<float>();
  {
    const py::gil_scoped_release release;  // the other replicas need the GIL to reach the collective
    replica->collectives->all_reduce(buffer, reduce);
  }
  const Tensor reduced = Tensor::from_vector<float>(buffer, tensor.shape());
  return (tensor.dtype() == DType::kF32 ? reduced : reduced.to(tensor.dtype())).to(tensor.device());
}

}  // namespace

void bind_distribute(py::module_& m) {
  py::class_<Strategy, std::shared_ptr<Strategy>>(m, "Strategy")
      .def_property_readonly("name", &Strategy::name)
      .def_property_readonly("devices",
                             [](const Strategy& strategy) {
                               std::vector<std::string> names;
                               for (const Device device : strategy.devices()) names.push_back(device.to_string());
                               return names;
                             })
      .def_property_readonly("num_replicas_in_sync", &Strategy::num_replicas_in_sync)
      .def_property_readonly("worker_rank", &Strategy::worker_rank)
      .def_property_readonly("num_workers", &Strategy::num_workers)
      // fn(local_replica) on every local replica's thread at once, each taking the GIL to run; returns
      // when all are done, raising the first replica's exception.
      .def("run",
           [](Strategy& strategy, const py::function& fn) {
             const py::gil_scoped_release release;
             strategy.run([&](int local_replica) {
               const py::gil_scoped_acquire gil;
               fn(local_replica);
             });
           })
      .def("barrier", [](Strategy& strategy) {
        const py::gil_scoped_release release;
        strategy.barrier();
      });
  m.def(
      "one_device_strategy", [](const std::string& device) { return distribute::OneDevice(Device::parse(device)); },
      py::arg("device"));
  m.def(
      "mirrored_strategy",
      [](const std::vector<std::string>& names) {
        std::vector<Device> devices;
        for (const std::string& name : names) devices.push_back(Device::parse(name));
        return distribute::Mirrored(devices);
      },
      py::arg("devices"));
  m.def("multi_worker_mirrored_strategy", [] { return distribute::MultiWorkerMirrored(); });
  // The replica id (over all workers) of the replica the calling thread runs; None outside strategy.run.
  m.def("replica_id", []() -> std::optional<int> {
    const distribute::ReplicaContext* replica = distribute::current_replica();
    return replica ? std::optional<int>(replica->replica_id) : std::nullopt;
  });
  m.def("replica_all_reduce", &replica_all_reduce, py::arg("value"), py::arg("op"));
  // Whether the calling thread is tracing a nimbus.function (its ops are being recorded, not run).
  m.def("tracing", [] { return current_op_interceptor() != nullptr; });
  m.def("replica_barrier", [] {
    const distribute::ReplicaContext* replica = distribute::current_replica();
    if (replica == nullptr || replica->num_replicas == 1) return;
    const py::gil_scoped_release release;
    replica->collectives->barrier();
  });
}

}  // namespace nimbus::python
