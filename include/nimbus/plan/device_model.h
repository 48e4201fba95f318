// A device as the planner's performance model sees it: achieved rates (peak x efficiency), memory and
// per-kernel overhead. Built from a catalog GPU or CPU, or from the profile `nimbus bench` measures on
// the local machine (then every figure is measured).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "nimbus/plan/catalog.h"
#include "nimbus/plan/workload.h"

namespace nimbus::plan {

// Defaults where the catalog has no measured efficiency: a large GEMM sustains about 70% of the
// tensor peak on current datacenter GPUs (STAS's MAMF table: 78-87%, less on small or power-capped
// parts); memory-bound kernels about 85% of the memory bandwidth; a kernel launch with the
// framework's dispatch costs about 5 microseconds on a GPU.
inline constexpr double kDefaultMatmulEfficiency = 0.7;
inline constexpr double kDefaultBandwidthEfficiency = 0.85;
inline constexpr double kDefaultVectorEfficiency = 0.5;
inline constexpr double kGpuLaunchSeconds = 5e-6;

struct DeviceModel {
  std::string name;  // a catalog name ("T4") or "cpu"
  double memory_bytes = 0;
  double bandwidth = 0;                        // achieved bytes/s
  std::map<Precision, double> matrix_flops{};  // achieved FLOP/s of matmuls, per precision it supports
  double convolution_ratio = 1;                // convolutions' achieved rate / matmuls'
  double vector_flops = 0;                     // achieved FLOP/s of other kernels (float32)
  double launch_seconds = 0;                   // per kernel
  // Extra fixed time of a matmul or convolution kernel (blocking, packing, thread start-up): what keeps
  // small ones below the rate. Measured on the CPU; folded into the efficiency on GPUs.
  double matmul_overhead_seconds = 0;
  double convolution_overhead_seconds = 0;

  bool supports(Precision precision) const { return matrix_flops.contains(precision); }
};

DeviceModel device_model(const GpuSpec& gpu);
// `cores` physical cores of a catalog CPU; memory is the instance's RAM.
DeviceModel device_model(const CpuSpec& cpu, int cores, double ram_bytes);

// What `nimbus bench` measures on the local machine (stored as JSON, see calibration.h).
// Each kernel kind is timed at two sizes in a traced graph and fitted to time = overhead + work / rate.
struct CalibrationProfile {
  std::string device = "cpu";
  int threads = 0;
  double matmul_flops = 0;  // FLOP/s of large matmuls
  double matmul_overhead_seconds = 0;
  double convolution_flops = 0;  // FLOP/s of large 3x3 convolutions
  double convolution_overhead_seconds = 0;
  double bandwidth = 0;       // bytes/s of elementwise kernels on activation-sized tensors
  double launch_seconds = 0;  // fixed time of one elementwise kernel in a traced graph
  double vector_flops = 0;    // FLOP/s of elementwise arithmetic
  double memory_bytes = 0;    // what the device can hold
  std::string measured_at;    // UTC date-time
};

DeviceModel device_model(const CalibrationProfile& profile);

}  // namespace nimbus::plan
