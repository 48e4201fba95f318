// Devices: where a tensor's memory lives and where its kernels run.
//
//   Device cpu = Device::cpu();             // "cpu:0"
//   Device gpu = Device::parse("cuda:1");  // bad text throws InvalidArgument
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace nimbus {

enum class DeviceType : uint8_t { kCPU, kCUDA };
inline constexpr int kNumDeviceTypes = 2;

std::string_view device_type_name(DeviceType type);

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  static Device cpu(int index = 0) { return {DeviceType::kCPU, index}; }
  static Device cuda(int index = 0) { return {DeviceType::kCUDA, index}; }
  // "cpu", "cpu:0", "cuda", "cuda:1", "gpu:0" (an alias of cuda).
  static Device parse(std::string_view text);

  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool operator==(const Device&) const = default;
  // "cpu:0"
  std::string to_string() const;
};

}  // namespace nimbus
