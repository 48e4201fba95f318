// A device as the planner's performance model sees it: achieved rates (peak x efficiency), memory and
// per-kernel overhead. Built from a catalog GPU or CPU, or from the profile `nimbus bench` measures on
// the local machine (then every figure is measured).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

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

// An op's measured cost per kernel: overhead_seconds + work / flops_per_second, with the work as the
// graph's cost counts it (graph/cost.h: elements, times the instructions of a fused program). A kernel's
// time is seldom one line in its work (small convolutions use the threads poorly), so an op measured at
// more than two sizes has a line per pair of neighbouring sizes: `beyond` holds the lines for larger
// kernels, each from its lower size's work on.
struct OpLine {
  double from_work = 0;
  double flops_per_second = 0;
  double overhead_seconds = 0;
};
struct OpRate {
  double flops_per_second = 0;
  double overhead_seconds = 0;   // dispatch and waking the compute threads
  std::vector<OpLine> beyond{};  // by from_work, ascending
  // The line that serves a kernel of `work`: the last one whose from_work it reaches.
  OpLine line_at(double work) const;
};

struct DeviceModel {
  std::string name;  // a catalog name ("T4") or "cpu"
  double memory_bytes = 0;
  double bandwidth = 0;                        // achieved bytes/s of kernels too large for the caches
  std::map<Precision, double> matrix_flops{};  // achieved FLOP/s of matmuls, per precision it supports
  double convolution_ratio = 1;                // convolutions' achieved rate / matmuls'
  double vector_flops = 0;                     // achieved FLOP/s of other kernels (float32)
  double launch_seconds = 0;                   // per kernel
  // Extra fixed time of a matmul or convolution kernel (blocking, packing, thread start-up): what keeps
  // small ones below the rate. Measured on the CPU; folded into the efficiency on GPUs.
  double matmul_overhead_seconds = 0;
  double convolution_overhead_seconds = 0;
  // Measured on the local machine only (empty or zero for catalog devices): each op's cost as a training
  // step runs it, by op_cost_key (ops/op_profile.h), and the trainer's own time per step outside its kernels.
  std::map<std::string, OpRate> op_rates{};
  double step_overhead_seconds = 0;
  // The device is the host's CPU: an input pipeline's threads take their time from its kernels.
  bool shares_host_cores = false;

  bool supports(Precision precision) const { return matrix_flops.contains(precision); }
  // The measured cost of kernels with this op_cost_key ("fused_elementwise[15]"), else of the op's kernels
  // together ("fused_elementwise"), else null.
  const OpRate* op_rate(const std::string& key) const;
};

DeviceModel device_model(const GpuSpec& gpu);
// `cores` physical cores of a catalog CPU; memory is the instance's RAM.
DeviceModel device_model(const CpuSpec& cpu, int cores, double ram_bytes);

// What `nimbus bench` measures on the local machine (stored as JSON, see calibration.h). Each kernel
// kind is timed at two sizes and fitted to time = overhead + work / rate: matmuls, convolutions,
// additions and fused kernels in traced chains, and every op of a probe model's training step.
struct CalibrationProfile {
  std::string device = "cpu";
  int threads = 0;
  double matmul_flops = 0;  // FLOP/s of large matmuls
  double matmul_overhead_seconds = 0;
  double convolution_flops = 0;  // FLOP/s of large 3x3 convolutions
  double convolution_overhead_seconds = 0;
  double bandwidth = 0;       // bytes/s of elementwise kernels on tensors larger than the caches
  double launch_seconds = 0;  // fixed time of one elementwise kernel in a traced graph
  double vector_flops = 0;    // instructions per second of a large fused elementwise kernel
  double memory_bytes = 0;    // what the device can hold
  // From a probe model's training steps (calibration.h): each op's cost, and the trainer's own time per
  // step beyond its kernels.
  std::map<std::string, OpRate> op_rates{};
  double step_overhead_seconds = 0;
  std::string measured_at{};  // UTC date-time
};

DeviceModel device_model(const CalibrationProfile& profile);

}  // namespace nimbus::plan
