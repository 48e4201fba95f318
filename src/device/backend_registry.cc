#include <fmt/format.h>

#include <array>
#include <mutex>

#include "nimbus/base/error.h"
#include "nimbus/device/backend.h"

namespace nimbus {

namespace {
std::array<std::unique_ptr<Backend>, kNumDeviceTypes>& registered_backends() {
  static std::array<std::unique_ptr<Backend>, kNumDeviceTypes> backends;
  return backends;
}
}  // namespace

void register_backend(std::unique_ptr<Backend> backend) {
  NIMBUS_ASSERT(backend != nullptr) << "null backend";
  auto& slot = registered_backends()[static_cast<int>(backend->type())];
  NIMBUS_ASSERT(slot == nullptr) << "backend registered twice: " << device_type_name(backend->type());
  slot = std::move(backend);
}

bool has_backend(DeviceType type) {
  const auto& slot = registered_backends()[static_cast<int>(type)];
  return slot != nullptr && slot->device_count() > 0;
}

Backend& backend(DeviceType type) {
  auto& slot = registered_backends()[static_cast<int>(type)];
  if (slot == nullptr) {
    throw Unavailable(
        fmt::format("no {} backend in this build of Nimbus", device_type_name(type)),
        type == DeviceType::kCUDA ? "rebuild with -DNIMBUS_CUDA=ON on a machine with the CUDA toolkit" : "");
  }
  if (slot->device_count() == 0) {
    const std::string reason = slot->unavailable_reason();
    throw Unavailable(
        fmt::format("the {} backend found no devices on this machine{}", device_type_name(type),
                    reason.empty() ? "" : ": " + reason),
        type == DeviceType::kCUDA ? "check that the NVIDIA driver is installed (nvidia-smi lists the GPUs)" : "");
  }
  return *slot;
}

namespace {
Backend& checked_backend(Device device) {
  Backend& b = backend(device.type);
  if (device.index < 0 || device.index >= b.device_count()) {
    throw NotFound(fmt::format("device {} does not exist: this machine has {} {} device(s)", device.to_string(),
                               b.device_count(), device_type_name(device.type)));
  }
  return b;
}
}  // namespace

Allocator& allocator_for(Device device) { return checked_backend(device).allocator(device.index); }
Stream& default_stream_for(Device device) { return checked_backend(device).default_stream(device.index); }

}  // namespace nimbus
