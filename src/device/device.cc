#include "nimbus/device/device.h"

#include <fmt/format.h>

#include <charconv>

#include "nimbus/base/error.h"

namespace nimbus {

std::string_view device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::kCPU: return "cpu";
    case DeviceType::kCUDA: return "cuda";
  }
  return "?";
}

Device Device::parse(std::string_view text) {
  const size_t colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  Device device;
  if (kind == "cpu") {
    device.type = DeviceType::kCPU;
  } else if (kind == "cuda" || kind == "gpu") {
    device.type = DeviceType::kCUDA;
  } else {
    throw InvalidArgument(fmt::format("unknown device '{}'", text), "use cpu, cpu:N, cuda or cuda:N");
  }
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

std::string Device::to_string() const { return fmt::format("{}:{}", device_type_name(type), index); }

}  // namespace nimbus
