// The performance model: how long one training step of a workload takes on a device.
//
// Per kernel, time = max(FLOPs / rate, bytes / bandwidth) + launch overhead, with the rate of the
// kernel's unit in the step's precision (matrix units for matmuls and convolutions, vector units
// otherwise; a calibrated device's measured rate for the op where it has one) and the bandwidth for
// the kernel's bytes (caches or memory). A calibrated device adds the trainer's own time per step. A step runs the
// micro-batch's kernels `accumulation` times and the per-step kernels (optimizer update) once. With N data-parallel
// devices, a ring all-reduce of the gradients takes 2 (N - 1) / N x gradient bytes / link bandwidth and overlaps the
// last micro-batch's backward pass (two thirds of its time); only the rest is exposed. The input takes the host's
// measured CPU time per sample: an input pipeline runs beside the device on host_cores (prefetch), so it bounds the
// step rather than adding to it, except on a CPU device, whose cores it shares; rows gathered by the training thread
// (data in memory) add to the step.
#pragma once

#include <cstdint>
#include <string>

#include "nimbus/plan/device_model.h"
#include "nimbus/plan/workload.h"

namespace nimbus::plan {

enum class Bottleneck { kCompute, kMemoryBandwidth, kLaunchOverhead, kInput, kCommunication };
std::string bottleneck_name(Bottleneck bottleneck);  // "compute", "memory bandwidth", ...

struct StepShape {
  int64_t micro_batch = 1;   // per device
  int64_t accumulation = 1;  // micro-batches per step
  int devices = 1;           // data-parallel replicas
  Precision precision = Precision::kFloat32;
  double link_bytes_per_second = 0;  // all-reduce bandwidth per direction between the devices
  int host_cores = 1;                // cores left for the input pipeline, per device
};

struct StepEstimate {
  double seconds = 0;
  double compute_seconds = 0;    // kernels whose FLOPs take longer than their bytes
  double bandwidth_seconds = 0;  // kernels whose bytes take longer
  double launch_seconds = 0;
  double host_seconds = 0;               // the trainer's own work per step, outside the kernels
  double allreduce_seconds = 0;          // the whole all-reduce
  double exposed_allreduce_seconds = 0;  // what overlap leaves on the step
  double input_seconds = 0;              // host time to produce one device's samples of the step (wall)
  Bottleneck bottleneck = Bottleneck::kCompute;
  // Share of the step the device spends in kernels.
  double device_utilization() const;
};

StepEstimate estimate_step(const Workload& work, const DeviceModel& device, const StepShape& shape);

// Ring all-reduce of `bytes` over `devices` at `bytes_per_second` per direction.
double ring_allreduce_seconds(double bytes, int devices, double bytes_per_second);

}  // namespace nimbus::plan
