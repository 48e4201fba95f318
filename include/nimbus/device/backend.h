// Backends: one per device type, registered at start-up. A backend owns the
// devices of its type, their allocators and streams, and copies memory.
//
//   Backend& cpu = backend(DeviceType::kCPU);
//   cpu.device_count();                       // 1
//   cpu.copy(src, Device::cpu(), dst, Device::cpu(), bytes, cpu.default_stream(0));
//   backend(DeviceType::kCUDA);  // without a CUDA build or driver: Unavailable, saying which
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "nimbus/device/allocator.h"
#include "nimbus/device/device.h"
#include "nimbus/device/stream.h"

namespace nimbus {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceType type() const = 0;
  virtual int device_count() const = 0;
  // Why device_count() is 0 ("the CUDA runtime found no NVIDIA driver ..."), with what to do; empty otherwise.
  virtual std::string unavailable_reason() const { return {}; }
  // One line about device `index` ("cpu:0: 2 threads, oneDNN 2.6.3").
  virtual std::string describe(int index) const = 0;
  // The hardware's name ("NVIDIA H200", the CPU's model name), as summary.json's device_names lists it.
  virtual std::string device_name(int index) const = 0;
  virtual Allocator& allocator(int index) = 0;
  virtual Stream& default_stream(int index) = 0;
  // Copies `bytes` between two devices (either may be the host CPU), ordered on `stream`.
  virtual void copy(const void* src, Device src_device, void* dst, Device dst_device, size_t bytes, Stream& stream) = 0;
};

// Registers the backend for its device type (done once, at library load).
void register_backend(std::unique_ptr<Backend> backend);
// Throws Unavailable when no backend of `type` exists or it has no devices.
Backend& backend(DeviceType type);
bool has_backend(DeviceType type);
// The backend registered for `type`, with devices or none; nullptr when this build has none.
Backend* find_backend(DeviceType type);

// Shorthands that check `device.index`.
Allocator& allocator_for(Device device);
Stream& default_stream_for(Device device);

}  // namespace nimbus
