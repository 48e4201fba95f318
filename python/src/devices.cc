// Devices and memory for python/nimbus/config.py and nimbus.device: the GPUs this process sees, the CPU's
// logical devices, each device's memory limit, mode and statistics, and the device that nimbus.device
// places new tensors on.
#include <fmt/format.h>

#include <optional>

#include "bindings.h"
#include "nimbus/device/backend.h"
#include "nimbus/device/device_choice.h"
#include "nimbus/device/logical_devices.h"
#include "nimbus/device/memory.h"

namespace nimbus::python {
namespace {

// The device of the innermost nimbus.device scope on this thread (TensorFlow's device scopes are per thread).
thread_local std::optional<Device> t_placement;

// The device whose allocator serves `device`: the CPU's logical devices share the host's one allocator.
Device memory_device(const std::string& name) {
  const Device device = Device::parse(name);
  return device.is_cpu() ? Device::cpu() : device;
}

}  // namespace

std::string tensorflow_device_name(Device device) {
  return fmt::format("/job:localhost/replica:0/task:0/device:{}:{}", device.is_cpu() ? "CPU" : "GPU", device.index);
}

Tensor placed(Tensor tensor) {
  if (!t_placement || t_placement->is_cpu() || tensor.device() == *t_placement) return tensor;
  return tensor.to(*t_placement);
}

void bind_devices(py::module_& m) {
  m.def("gpu_count", [] {
    static const int count = probe_gpus().gpu_count;
    return count;
  });
  m.def("logical_cpu_device_count", &logical_cpu_device_count);
  m.def(
      "set_logical_cpu_devices",
      [](int count) { set_logical_cpu_devices(std::vector<LogicalCpuDevice>(static_cast<size_t>(count))); },
      py::arg("count"));
  m.def(
      "set_memory_limit",
      [](const std::string& device, std::optional<uint64_t> limit) {
        const Device target = memory_device(device);
        MemoryOptions options = memory_options(target);
        options.limit = limit;
        configure_memory(target, options);
      },
      py::arg("device"), py::arg("limit"));
  m.def(
      "set_memory_growth",
      [](const std::string& device, bool growth) {
        const Device target = memory_device(device);
        MemoryOptions options = memory_options(target);
        options.mode = growth ? MemoryMode::kGrowth : MemoryMode::kPreallocate;
        configure_memory(target, options);
      },
      py::arg("device"), py::arg("growth"));
  m.def(
      "memory_info",
      [](const std::string& device) {
        const AllocatorStats stats = memory_stats(memory_device(device));
        py::dict info;
        info["current"] = stats.bytes_in_use;
        info["peak"] = stats.peak_bytes_in_use;
        return info;
      },
      py::arg("device"));
  m.def(
      "reset_memory_stats",
      [](const std::string& device) {
        const Device target = memory_device(device);
        backend(target.type).allocator(target.index).reset_peak();
      },
      py::arg("device"));
  // Whether a tensor has been allocated yet: TensorFlow's runtime is initialized by then, and refuses
  // device configuration from that point on.
  m.def("tensors_allocated", [] { return memory_stats(Device::cpu()).num_allocations > 0; });
  // Sets the device new tensors go to on this thread (None: the CPU) and returns the previous one.
  m.def(
      "set_placement",
      [](const std::optional<std::string>& device) {
        const std::optional<Device> previous = t_placement;
        t_placement = device ? std::optional<Device>(Device::parse(*device)) : std::nullopt;
        return previous ? std::optional<std::string>(previous->to_string()) : std::nullopt;
      },
      py::arg("device"));
}

}  // namespace nimbus::python
