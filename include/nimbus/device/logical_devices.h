// Logical CPU devices (TensorFlow's tf.config.set_logical_device_configuration):
// one CPU split into N devices, cpu:0 .. cpu:N-1, each running its kernels on
// its own budget of compute threads, so mirrored training runs, is tested and
// is benchmarked on machines without accelerators.
//
//   set_logical_cpu_devices({{.threads = 1}, {.threads = 1}});   // cpu:0 and cpu:1, one thread each
//   backend(DeviceType::kCPU).device_count();                    // 2
//   {
//     LogicalDeviceScope scope(Device::cpu(1));   // this thread's kernels now use cpu:1's budget
//     ...
//   }
//
// The logical devices share the host's memory (one allocator): only the
// compute threads are split. A thread's budget is OpenMP's per-thread
// nthreads setting, which oneDNN's kernels and ours both read.
#pragma once

#include <vector>

#include "nimbus/device/device.h"

namespace nimbus {

struct LogicalCpuDevice {
  // Compute threads of this device; 0: an even share of the cores (at least one).
  int threads = 0;
};

// Replaces the CPU's logical devices; an empty list restores the single cpu:0.
// Throws InvalidArgument for a negative thread count.
void set_logical_cpu_devices(const std::vector<LogicalCpuDevice>& devices);
// How many logical CPU devices there are (1 unless set_logical_cpu_devices split the CPU).
int logical_cpu_device_count();
// The compute threads of logical CPU device `index` (NotFound names the devices there are).
int logical_cpu_device_threads(int index);

// While alive, the calling thread runs its kernels with `device`'s thread budget; restores the
// previous budget when it ends. `device` must be a CPU device that exists.
class LogicalDeviceScope {
 public:
  explicit LogicalDeviceScope(Device device);
  ~LogicalDeviceScope();
  LogicalDeviceScope(const LogicalDeviceScope&) = delete;
  LogicalDeviceScope& operator=(const LogicalDeviceScope&) = delete;

 private:
  int previous_threads_;
};

}  // namespace nimbus
