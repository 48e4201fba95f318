#include "nimbus/plan/step_model.h"

#include <algorithm>
#include <array>
#include <utility>

namespace nimbus::plan {

std::string bottleneck_name(Bottleneck bottleneck) {
  switch (bottleneck) {
    case Bottleneck::kCompute: return "compute";
    case Bottleneck::kMemoryBandwidth: return "memory bandwidth";
    case Bottleneck::kLaunchOverhead: return "launch overhead";
    case Bottleneck::kInput: return "input";
    case Bottleneck::kCommunication: return "communication";
  }
  return "compute";
}

double StepEstimate::device_utilization() const {
  return seconds > 0 ? std::min(1.0, (compute_seconds + bandwidth_seconds) / seconds) : 0;
}

double ring_allreduce_seconds(double bytes, int devices, double bytes_per_second) {
  if (devices <= 1 || bytes_per_second <= 0) return 0;
  return 2.0 * (devices - 1) / devices * bytes / bytes_per_second;
}

StepEstimate estimate_step(const Workload& work, const DeviceModel& device, const StepShape& shape) {
  const double matmul_rate = device.matrix_flops.at(shape.precision);
  StepEstimate step;
  double micro_batch_seconds = 0;
  for (const Kernel& kernel : work.kernels_at(shape.micro_batch, shape.precision)) {
    double rate = device.vector_flops;
    double overhead = device.launch_seconds;
    if (const OpRate* measured = device.op_rate(kernel.op)) {
      const OpLine line = measured->line_at(kernel.flops);
      rate = line.flops_per_second;
      overhead = line.overhead_seconds;
    } else if (kernel.unit == Unit::kMatmul) {
      rate = matmul_rate;
      overhead += device.matmul_overhead_seconds;
    } else if (kernel.unit == Unit::kConvolution) {
      rate = matmul_rate * device.convolution_ratio;
      overhead += device.convolution_overhead_seconds;
    }
    const double flop_time = kernel.flops / rate;
    const double byte_time = kernel.bytes / device.bandwidth;
    const double runs = kernel.per_step ? 1.0 : static_cast<double>(shape.accumulation);
    (flop_time >= byte_time ? step.compute_seconds : step.bandwidth_seconds) += runs * std::max(flop_time, byte_time);
    step.launch_seconds += runs * overhead;
    if (!kernel.per_step) micro_batch_seconds += std::max(flop_time, byte_time) + overhead;
  }
  step.allreduce_seconds = ring_allreduce_seconds(work.gradient_bytes, shape.devices, shape.link_bytes_per_second);
  const double backward_seconds = micro_batch_seconds * 2 / 3;
  step.exposed_allreduce_seconds = std::max(0.0, step.allreduce_seconds - backward_seconds);
  step.host_seconds = device.step_overhead_seconds;
  const double device_seconds = step.compute_seconds + step.bandwidth_seconds + step.launch_seconds +
                                step.host_seconds + step.exposed_allreduce_seconds;
  const auto samples = static_cast<double>(shape.micro_batch * shape.accumulation);
  const double input_cpu_seconds = work.input.seconds_per_sample * samples;
  step.input_seconds = work.input.in_step ? input_cpu_seconds : input_cpu_seconds / std::max(1, shape.host_cores);
  // A pipeline runs beside the device and bounds the step, unless it runs on the device's own cores.
  const bool input_adds = work.input.in_step || device.shares_host_cores;
  step.seconds = input_adds ? device_seconds + step.input_seconds : std::max(device_seconds, step.input_seconds);

  const std::array<std::pair<double, Bottleneck>, 5> shares = {{
      {step.compute_seconds, Bottleneck::kCompute},
      {step.bandwidth_seconds, Bottleneck::kMemoryBandwidth},
      {step.launch_seconds + step.host_seconds, Bottleneck::kLaunchOverhead},
      {step.exposed_allreduce_seconds, Bottleneck::kCommunication},
      {step.input_seconds, Bottleneck::kInput},
  }};
  step.bottleneck = std::ranges::max(shares, {}, &std::pair<double, Bottleneck>::first).second;
  return step;
}

}  // namespace nimbus::plan
