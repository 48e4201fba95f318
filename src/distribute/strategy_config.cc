// runtime.strategy: {type, devices, collective_timeout, bucket_size, overlap} -> a Strategy, its
// replicas on the training device's kind (GPUs: NCCL).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "nimbus/base/error.h"
#include "nimbus/base/size_units.h"
#include "nimbus/device/backend.h"
#include "nimbus/device/logical_devices.h"
#include "nimbus/device/runtime.h"
#include "nimbus/distribute/multi_worker.h"
#include "nimbus/distribute/strategy.h"

namespace nimbus::distribute {

std::shared_ptr<Strategy> strategy_from_config(const nlohmann::json& section, int threads, const std::string& where,
                                               Device training_device) {
  if (section.is_null()) return OneDevice();
  StrategyOptions options;
  if (section.contains("collective_timeout") && !section["collective_timeout"].is_null()) {
    const double seconds = section["collective_timeout"].get<double>();
    if (!(seconds > 0)) {
      throw InvalidArgument(fmt::format("{}: runtime.strategy.collective_timeout is {} seconds", where, seconds),
                            "give a positive number of seconds (default 600)");
    }
    options.collectives.timeout = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  }
  if (section.contains("bucket_size") && !section["bucket_size"].is_null()) {
    const nlohmann::json& size = section["bucket_size"];
    options.bucket_bytes = size.is_string() ? parse_size(size.get<std::string>()) : size.get<size_t>();
  }
  if (section.contains("overlap") && !section["overlap"].is_null()) {
    if (!section["overlap"].is_boolean()) {
      throw InvalidArgument(fmt::format("{}: runtime.strategy.overlap is {}", where, section["overlap"].dump()),
                            "use true (all-reduce each bucket during the backward pass, the default) or false");
    }
    options.overlap = section["overlap"].get<bool>();
  }
  const std::string type = section.value("type", "one_device");
  std::vector<Device> devices;
  if (section.contains("devices") && section["devices"].is_array()) {
    for (const auto& text : section["devices"]) devices.push_back(Device::parse(text.get<std::string>()));
  }
  if (type == "one_device") {
    if (devices.size() > 1) {
      throw InvalidArgument(fmt::format("{}: runtime.strategy one_device lists {} devices", where, devices.size()),
                            "use type: mirrored for several devices");
    }
    return OneDevice(devices.empty() ? Device::cpu() : devices[0]);
  }
  if (type == "mirrored") {
    if (devices.empty() && !training_device.is_cpu()) {
      // Every GPU this process sees, as TensorFlow's MirroredStrategy() takes.
      for (int i = 0; i < backend(training_device.type).device_count(); ++i)
        devices.emplace_back(training_device.type, i);
    }
    if (devices.empty()) devices = {Device::cpu(0), Device::cpu(1)};
    const auto cpus = std::count_if(devices.begin(), devices.end(), [](Device d) { return d.is_cpu(); });
    if (cpus > 1) {
      // The runtime's compute threads, shared evenly by the logical CPU devices.
      const int total = threads > 0 ? threads : hardware_cores();
      std::vector<LogicalCpuDevice> logical;
      int highest = 0;
      for (Device d : devices) highest = std::max(highest, d.is_cpu() ? d.index : 0);
      for (int i = 0; i <= highest; ++i) logical.push_back({.threads = std::max(1, total / static_cast<int>(cpus))});
      set_logical_cpu_devices(logical);
    }
    return Mirrored(devices, options);
  }
  if (type == "multi_worker_mirrored") return MultiWorkerMirrored(options, training_device.type);
  throw InvalidArgument(fmt::format("{}: runtime.strategy.type is '{}'", where, type),
                        "use one_device, mirrored or multi_worker_mirrored");
}

}  // namespace nimbus::distribute
