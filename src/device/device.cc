#include "nimbus/device/device.h"

#include <fmt/format.h>

#include <charconv>
#include <deque>
#include <limits>
#include <mutex>

#include "nimbus/base/error.h"

namespace nimbus {

namespace {

// The registered names, by id; a deque, so names handed out stay where they are.
struct DeviceTypeNames {
  std::mutex mutex;
  std::deque<std::string> names;
};

DeviceTypeNames& device_type_names() {
  static DeviceTypeNames names;
  return names;
}

// The id of `name`, or the number of names when it is not registered; the caller holds the mutex.
size_t id_of(const DeviceTypeNames& registry, std::string_view name) {
  size_t id = 0;
  while (id < registry.names.size() && registry.names[id] != name) ++id;
  return id;
}

}  // namespace

DeviceType DeviceType::registered(std::string_view name) {
  DeviceTypeNames& registry = device_type_names();
  const std::lock_guard lock(registry.mutex);
  const size_t id = id_of(registry, name);
  if (id == registry.names.size()) {
    NIMBUS_ASSERT(id <= std::numeric_limits<uint8_t>::max()) << "too many device types";
    registry.names.emplace_back(name);
  }
  return DeviceType(static_cast<uint8_t>(id));
}

std::optional<DeviceType> DeviceType::find(std::string_view name) {
  DeviceTypeNames& registry = device_type_names();
  const std::lock_guard lock(registry.mutex);
  const size_t id = id_of(registry, name);
  if (id == registry.names.size()) return std::nullopt;
  return DeviceType(static_cast<uint8_t>(id));
}

std::string_view DeviceType::name() const {
  DeviceTypeNames& registry = device_type_names();
  const std::lock_guard lock(registry.mutex);
  return registry.names[id_];
}

Device Device::parse(std::string_view text) {
  const size_t colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  const std::optional<DeviceType> type = DeviceType::find(kind == "gpu" ? "cuda" : kind);
  if (!type) throw InvalidArgument(fmt::format("unknown device '{}'", text), "use cpu, cpu:N, cuda or cuda:N");
  Device device{.type = *type};
  if (colon != std::string_view::npos) {
    const std::string_view index = text.substr(colon + 1);
    const auto [ptr, ec] = std::from_chars(index.data(), index.data() + index.size(), device.index);
    if (ec != std::errc() || ptr != index.data() + index.size() || device.index < 0) {
      throw InvalidArgument(fmt::format("device '{}' has a bad index '{}'", text, index),
                            "the index is a non-negative integer, as in cuda:0");
    }
  }
  return device;
}

std::string Device::to_string() const { return fmt::format("{}:{}", type.name(), index); }

}  // namespace nimbus
