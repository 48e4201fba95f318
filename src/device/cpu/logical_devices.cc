#include "nimbus/device/logical_devices.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <mutex>

#include "nimbus/base/error.h"
#include "nimbus/device/runtime.h"

namespace nimbus {
namespace {

struct LogicalDevices {
  std::mutex mutex;
  // Thread budgets by device index; empty: the one cpu:0 with the runtime's pool.
  std::vector<int> threads;
};

LogicalDevices& logical_devices() {
  static LogicalDevices devices;
  return devices;
}

}  // namespace

void set_logical_cpu_devices(const std::vector<LogicalCpuDevice>& devices) {
  std::vector<int> threads;
  const int share = std::max(1, hardware_cores() / std::max<int>(1, static_cast<int>(devices.size())));
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].threads < 0) {
      throw InvalidArgument(fmt::format("logical device cpu:{} has {} threads", i, devices[i].threads),
                            "give each logical CPU device 0 (an even share of the cores) or more threads");
    }
    threads.push_back(devices[i].threads == 0 ? share : devices[i].threads);
  }
  LogicalDevices& state = logical_devices();
  std::lock_guard lock(state.mutex);
  state.threads = std::move(threads);
}

int logical_cpu_device_count() {
  LogicalDevices& state = logical_devices();
  std::lock_guard lock(state.mutex);
  return std::max<int>(1, static_cast<int>(state.threads.size()));
}

int logical_cpu_device_threads(int index) {
  LogicalDevices& state = logical_devices();
  std::lock_guard lock(state.mutex);
  if (state.threads.empty() && index == 0) return compute_threads();
  if (index < 0 || index >= static_cast<int>(state.threads.size())) {
    throw NotFound(
        fmt::format("no logical CPU device cpu:{}: there {}", index,
                    state.threads.size() <= 1 ? std::string("is only cpu:0")
                                              : fmt::format("are cpu:0 .. cpu:{}", state.threads.size() - 1)),
        "split the CPU first: set_logical_cpu_devices, or list the devices in runtime.strategy.devices");
  }
  return state.threads[static_cast<size_t>(index)];
}

LogicalDeviceScope::LogicalDeviceScope(Device device) : previous_threads_(omp_get_max_threads()) {
  if (!device.is_cpu()) {
    throw InvalidArgument(
        fmt::format("{} is not a CPU device: only CPU devices have thread budgets", device.to_string()));
  }
  // OpenMP's thread count is a per-thread setting, so other threads keep theirs.
  omp_set_num_threads(logical_cpu_device_threads(device.index));
}

LogicalDeviceScope::~LogicalDeviceScope() { omp_set_num_threads(previous_threads_); }

}  // namespace nimbus
