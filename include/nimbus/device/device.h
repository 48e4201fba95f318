// Devices: where a tensor's memory lives and where its kernels run.
//
//   Device cpu = Device::cpu();             // "cpu:0"
//   Device gpu = Device::parse("cuda:1");  // bad text throws InvalidArgument
//   DeviceType toy = DeviceType::registered("toy");  // a new backend's type (docs/architecture.md)
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nimbus {

// A kind of device, registered by name: backends, kernel tables and
// Device::parse key on it. kCPU and kCUDA are registered like any other type,
// in every build (so "cuda:0" parses and then says why there is no CUDA
// backend); a new backend registers its own with registered("name").
class DeviceType {
 public:
  static const DeviceType kCPU;   // "cpu"
  static const DeviceType kCUDA;  // "cuda"

  // The type named `name` (lower case, as in "cpu:0"), registered on first use.
  static DeviceType registered(std::string_view name);
  // The type named `name`, or nullopt when none was registered.
  static std::optional<DeviceType> find(std::string_view name);

  // 0, 1, ... in order of registration: an index for tables sized by type.
  size_t id() const { return id_; }
  std::string_view name() const;
  auto operator<=>(const DeviceType&) const = default;

 private:
  explicit DeviceType(uint8_t id) : id_(id) {}
  uint8_t id_;
};
inline const DeviceType DeviceType::kCPU = DeviceType::registered("cpu");
inline const DeviceType DeviceType::kCUDA = DeviceType::registered("cuda");

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  static Device cpu(int index = 0) { return {DeviceType::kCPU, index}; }
  static Device cuda(int index = 0) { return {DeviceType::kCUDA, index}; }
  // "cpu", "cpu:0", "cuda", "cuda:1", "gpu:0" (an alias of cuda), or a registered type's name.
  static Device parse(std::string_view text);

  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool operator==(const Device&) const = default;
  // "cpu:0"
  std::string to_string() const;
};

}  // namespace nimbus
