#include <fmt/format.h>

#include <map>

#include "nimbus/base/error.h"
#include "nimbus/device/backend.h"

namespace nimbus {

namespace {
std::map<DeviceType, std::unique_ptr<Backend>>& registered_backends() {
  static std::map<DeviceType, std::unique_ptr<Backend>> backends;
  return backends;
}
}  // namespace

void register_backend(std::unique_ptr<Backend> backend) {
  NIMBUS_ASSERT(backend != nullptr) << "null backend";
  auto& slot = registered_backends()[backend->type()];
  NIMBUS_ASSERT(slot == nullptr) << "backend registered twice: " << backend->type().name();
  slot = std::move(backend);
}

bool has_backend(DeviceType type) {
  const auto found = registered_backends().find(type);
  return found != registered_backends().end() && found->second->device_count() > 0;
}

Backend* find_backend(DeviceType type) {
  const auto found = registered_backends().find(type);
  return found == registered_backends().end() ? nullptr : found->second.get();
}

Backend& backend(DeviceType type) {
  const auto found = registered_backends().find(type);
  if (found == registered_backends().end()) {
    throw Unavailable(
        fmt::format("no {} backend in this build of Nimbus", type.name()),
        type == DeviceType::kCUDA ? "rebuild with -DNIMBUS_CUDA=ON on a machine with the CUDA toolkit" : "");
  }
  Backend& registered = *found->second;
  if (registered.device_count() == 0) {
    const std::string reason = registered.unavailable_reason();
    throw Unavailable(
        fmt::format("the {} backend found no devices on this machine{}", type.name(),
                    reason.empty() ? "" : ": " + reason),
        type == DeviceType::kCUDA ? "check that the NVIDIA driver is installed (nvidia-smi lists the GPUs)" : "");
  }
  return registered;
}

namespace {
Backend& checked_backend(Device device) {
  Backend& b = backend(device.type);
  if (device.index < 0 || device.index >= b.device_count()) {
    throw NotFound(fmt::format("device {} does not exist: this machine has {} {} device(s)", device.to_string(),
                               b.device_count(), device.type.name()));
  }
  return b;
}
}  // namespace

Allocator& allocator_for(Device device) { return checked_backend(device).allocator(device.index); }
Stream& default_stream_for(Device device) { return checked_backend(device).default_stream(device.index); }

}  // namespace nimbus
