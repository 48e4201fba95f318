// Which device a run uses, from runtime.device or --device: `auto` takes a GPU when this build
// has the CUDA backend and the machine a driver and a GPU, else the CPU, and says why.
//
//   DeviceChoice choice = choose_device("auto", "runtime.device", probe_gpus());
//   choice.device;   // cuda:0, or cpu:0
//   choice.reason;   // "auto: this build has no CUDA backend"
//
// The choice is a function of the probe, so tests give it any machine (several GPUs, no driver).
#pragma once

#include <string>
#include <string_view>

#include "nimbus/device/device.h"

namespace nimbus {

// The GPUs as this process sees them: what `auto` decides on.
struct GpuProbe {
  // This build has the CUDA backend (-DNIMBUS_CUDA=ON).
  bool cuda_backend = false;
  // GPUs the driver shows this process (CUDA_VISIBLE_DEVICES applied).
  int gpu_count = 0;
  // Why gpu_count is 0 in a CUDA build: no driver (libcuda), the driver's error, or no GPU.
  std::string unavailable_reason;
};

GpuProbe probe_gpus();

// Why the probe has no GPU to offer ("this build has no CUDA backend", "no NVIDIA driver: ...");
// empty when it has one.
std::string why_no_gpu(const GpuProbe& probe);

struct DeviceChoice {
  Device device;
  // "auto: ..." when auto chose; else where the device was named ("runtime.device: cuda:1").
  std::string reason;
  // "cpu:0 (auto: this build has no CUDA backend)": what a run's first lines say.
  std::string to_string() const;
};

// The device `text` names (auto, cpu, cpu:N, cuda, cuda:N, gpu:N), `source` naming where the text
// came from in messages (runtime.device, --device). auto: cuda:0 when the probe has a GPU (one GPU; a
// mirrored strategy trains on several, through NCCL), else cpu:0. Throws
// InvalidArgument for text that names no device, Unavailable for a GPU the build or machine lacks,
// NotFound for a GPU index past the last.
DeviceChoice choose_device(std::string_view text, std::string_view source, const GpuProbe& probe);

}  // namespace nimbus
