// nimbus info: the devices and libraries this build can use, why there is no GPU when there is
// none, which NCCL it loaded, and the device a run takes by default (runtime.device: auto).
#include <iostream>

#include "commands.h"
#include "nimbus/device/device_choice.h"
#include "nimbus/nimbus.h"

namespace nimbus::cli {

Command add_info_command(CLI::App& app) {
  app.add_subcommand("info", "show the devices and libraries this build can use, and why there is no GPU");
  return [] {
    Backend& cpu = backend(DeviceType::kCPU);
    for (int i = 0; i < cpu.device_count(); ++i) std::cout << cpu.describe(i) << "\n";
    const GpuProbe gpus = probe_gpus();
    if (gpus.gpu_count == 0) {
      // No CUDA backend in this build, no driver (libcuda), the driver's error, or no GPU.
      std::cout << "cuda: not available: " << why_no_gpu(gpus) << "\n";
    } else {
      Backend& cuda = backend(DeviceType::kCUDA);
      for (int i = 0; i < gpus.gpu_count; ++i) std::cout << cuda.describe(i) << "\n";
    }
    // NCCL (loaded at run time): what mirrored over GPUs and multi_worker_mirrored on GPUs need.
    std::cout << nccl_status().to_string() << "\n";
    std::cout << "default training device: " << choose_device("auto", "runtime.device", gpus).to_string() << "\n";
    return 0;
  };
}

}  // namespace nimbus::cli
