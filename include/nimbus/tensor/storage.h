// Storage: one block of device memory, shared by the tensors that view it
// (a reshape shares its input's storage; a flat parameter buffer is carved
// into many tensors by byte offset).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "nimbus/device/device.h"

namespace nimbus {

class Allocator;

class Storage {
 public:
  // Allocates `bytes` on `device` from its allocator (the host allocator within a HostMemoryScope on the CPU).
  Storage(Device device, size_t bytes);
  // Wraps memory owned elsewhere; `release` runs when the last tensor lets go.
  Storage(Device device, void* data, size_t bytes, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  Device device_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Allocator* allocator_ = nullptr;  // null for wrapped memory
  std::function<void()> release_;
};

}  // namespace nimbus
