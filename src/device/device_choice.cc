#include "nimbus/device/device_choice.h"

#include <fmt/format.h>

#include "nimbus/base/error.h"
#include "nimbus/device/backend.h"

namespace nimbus {

GpuProbe probe_gpus() {
  const Backend* cuda = find_backend(DeviceType::kCUDA);
  if (cuda == nullptr) return {};
  return {.cuda_backend = true, .gpu_count = cuda->device_count(), .unavailable_reason = cuda->unavailable_reason()};
}

std::string why_no_gpu(const GpuProbe& probe) {
  if (!probe.cuda_backend) return "this build has no CUDA backend";
  if (probe.gpu_count > 0) return {};
  return probe.unavailable_reason.empty() ? "the NVIDIA driver reports no GPU" : probe.unavailable_reason;
}

std::string DeviceChoice::to_string() const { return fmt::format("{} ({})", device.to_string(), reason); }

DeviceChoice choose_device(std::string_view text, std::string_view source, const GpuProbe& probe) {
  const std::string no_gpu = why_no_gpu(probe);
  if (text == "auto") {
    if (!no_gpu.empty()) return {Device::cpu(), "auto: " + no_gpu};
    if (probe.gpu_count == 1) return {Device::cuda(), "auto: the one GPU present"};
    return {Device::cuda(), fmt::format("auto: {} GPUs present, one used: runtime.device cuda with "
                                        "runtime.strategy.type mirrored trains on all of them (through NCCL)",
                                        probe.gpu_count)};
  }
  Device device;
  try {
    device = Device::parse(text);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: {}", source, e.message()), "use auto, cpu, cuda or cuda:N");
  }
  const std::string named = fmt::format("{}: {}", source, text);
  if (device.type != DeviceType::kCUDA) return {device, named};
  if (!no_gpu.empty()) {
    throw Unavailable(fmt::format("{}: {}", named, no_gpu),
                      probe.cuda_backend ? "install the NVIDIA driver (nvidia-smi should list the GPU), or run on the "
                                           "CPU: cpu, or auto (a GPU when there is one, else the CPU)"
                                         : "use a build made with -DNIMBUS_CUDA=ON, or run on the CPU: cpu, or auto "
                                           "(a GPU when there is one, else the CPU)");
  }
  if (device.index >= probe.gpu_count) {
    throw NotFound(fmt::format("{}: no such GPU: this machine has {} (cuda:0 to cuda:{})", named, probe.gpu_count,
                               probe.gpu_count - 1),
                   "nimbus info lists them; CUDA_VISIBLE_DEVICES renumbers the ones a process sees from 0");
  }
  return {device, named};
}

}  // namespace nimbus
