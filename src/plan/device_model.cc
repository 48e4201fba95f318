#include "nimbus/plan/device_model.h"

namespace nimbus::plan {

DeviceModel device_model(const GpuSpec& gpu) {
  const double matmul_efficiency = gpu.matmul_efficiency.value_or(kDefaultMatmulEfficiency);
  DeviceModel model{.name = gpu.short_name.empty() ? gpu.name : gpu.short_name};
  model.memory_bytes = gpu.memory_gb * 1e9;
  model.bandwidth = gpu.memory_bandwidth_gbps * 1e9 * kDefaultBandwidthEfficiency;
  // float32 matmuls run on the CUDA cores: Nimbus does not switch them to TF32 behind the user's back.
  model.matrix_flops[Precision::kFloat32] = gpu.tflops.fp32 * 1e12 * matmul_efficiency;
  if (gpu.tflops.bf16) model.matrix_flops[Precision::kMixedBfloat16] = *gpu.tflops.bf16 * 1e12 * matmul_efficiency;
  if (gpu.tflops.fp16) model.matrix_flops[Precision::kMixedFloat16] = *gpu.tflops.fp16 * 1e12 * matmul_efficiency;
  model.vector_flops = gpu.tflops.fp32 * 1e12 * kDefaultVectorEfficiency;
  model.launch_seconds = kGpuLaunchSeconds;
  return model;
}

DeviceModel device_model(const CpuSpec& cpu, int cores, double ram_bytes) {
  DeviceModel model{.name = cpu.name, .shares_host_cores = true};
  model.memory_bytes = ram_bytes;
  model.bandwidth = cpu.memory_bandwidth_gbps_per_core * 1e9 * cores * kDefaultBandwidthEfficiency;
  const double peak = cpu.fp32_gflops_per_core * 1e9 * cores;
  model.matrix_flops[Precision::kFloat32] = peak * cpu.matmul_efficiency;
  model.vector_flops = peak * kDefaultVectorEfficiency;
  // A traced step's kernel on the CPU costs a few microseconds of dispatch and thread wake-up.
  model.launch_seconds = 5e-6;
  return model;
}

DeviceModel device_model(const CalibrationProfile& profile) {
  DeviceModel model{.name = profile.device, .shares_host_cores = profile.device == "cpu"};
  model.memory_bytes = profile.memory_bytes;
  model.bandwidth = profile.bandwidth;
  model.matrix_flops[Precision::kFloat32] = profile.matmul_flops;
  model.convolution_ratio = profile.convolution_flops / profile.matmul_flops;
  model.vector_flops = profile.vector_flops;
  model.launch_seconds = profile.launch_seconds;
  model.matmul_overhead_seconds = profile.matmul_overhead_seconds;
  model.convolution_overhead_seconds = profile.convolution_overhead_seconds;
  model.op_rates = profile.op_rates;
  model.step_overhead_seconds = profile.step_overhead_seconds;
  return model;
}

OpLine OpRate::line_at(double work) const {
  OpLine line{.flops_per_second = flops_per_second, .overhead_seconds = overhead_seconds};
  for (const OpLine& next : beyond) {
    if (work >= next.from_work) line = next;
  }
  return line;
}

const OpRate* DeviceModel::op_rate(const std::string& key) const {
  if (const auto exact = op_rates.find(key); exact != op_rates.end()) return &exact->second;
  if (const auto all = op_rates.find(key.substr(0, key.find('['))); all != op_rates.end()) return &all->second;
  return nullptr;
}

}  // namespace nimbus::plan
