// What one training step of a model costs, as a function of the micro-batch: the kernels it runs
// (FLOPs and bytes moved, on the matrix units or not), the gradient bytes a data-parallel step
// all-reduces, and the device memory it needs. The planner prices this on every device it considers.
//
// Every op Nimbus traces is linear in the batch (a matmul's FLOPs are 2 m n k with m the batch, an
// elementwise op's bytes scale with its rows, the weights and optimizer slots do not change), so two
// traces at different micro-batches give each kernel's cost as fixed + per_sample * micro_batch.
//
//   Workload work = Workload::from_two_traces(trace_at_8, trace_at_16);   // e.g. from the traced train step
//   Workload rough = Workload::from_totals({.parameters = 25e6, .flops_per_sample = 12e9});  // other frameworks
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nimbus::plan {

// Keras's policy names: matrix kernels in the compute dtype, master weights in float32.
enum class Precision { kFloat32, kMixedBfloat16, kMixedFloat16 };
std::string precision_name(Precision precision);  // "float32", "mixed_bfloat16", "mixed_float16"
Precision precision_from_name(const std::string& name);

// Matmuls and convolutions run on the matrix units (tensor cores) in reduced precision; the rest on
// vector units. Convolutions are told apart because their kernels reach a different share of the
// matrix rate on some devices (the CPU's direct convolutions).
enum class Unit { kMatmul, kConvolution, kVector };
inline bool on_matrix_units(Unit unit) { return unit != Unit::kVector; }

struct Kernel {
  Unit unit = Unit::kVector;
  double flops = 0;
  double bytes = 0;
  // Runs once per step (the optimizer's update) rather than once per micro-batch.
  bool per_step = false;
  std::string op{};  // its op_cost_key ("matmul", "fused_elementwise[15]"): a calibrated device may know its cost
};

// A traced step at one micro-batch: what Workload::from_two_traces reads.
struct StepTrace {
  int64_t micro_batch = 0;
  std::vector<Kernel> kernels{};
  double memory_bytes = 0;  // the memory accounting's total at this micro-batch, float32
  double parameter_bytes = 0;
  double gradient_bytes = 0;
};

struct LinearKernel {
  Unit unit = Unit::kVector;
  double flops_fixed = 0, flops_per_sample = 0;
  double bytes_fixed = 0, bytes_per_sample = 0;
  bool per_step = false;
  std::string op{};
};

// The host's work to produce the training samples (train/input_cost.h, measured on this machine).
struct InputWork {
  double seconds_per_sample = 0;  // host CPU seconds per sample
  // The training thread produces each batch before its step (tensors in memory, rows gathered), so the
  // cost adds to the step; otherwise an input pipeline's threads produce it beside training.
  bool in_step = false;
};

struct Workload {
  std::string name;
  std::vector<LinearKernel> kernels;
  double parameter_bytes = 0;  // float32 trainable weights
  double gradient_bytes = 0;   // what a data-parallel step all-reduces (float32)
  // Device memory in float32 at micro-batch m: memory_fixed_bytes + memory_per_sample_bytes * m.
  double memory_fixed_bytes = 0;
  double memory_per_sample_bytes = 0;
  InputWork input{};

  // The kernels of one micro-batch step (per_step kernels included once).
  std::vector<Kernel> kernels_at(int64_t micro_batch, Precision precision) const;
  // Device memory at this micro-batch: half-precision activations and a half-precision copy of the
  // weights next to the float32 master weights under mixed precision.
  double memory_bytes(int64_t micro_batch, Precision precision) const;
  double flops_per_sample() const;

  // Two traces of the same step at different micro-batches (same kernels in the same order).
  static Workload from_two_traces(const StepTrace& small, const StepTrace& large);

  // A model described by totals only (for users of other frameworks): one matrix kernel with the
  // FLOPs as a matmul, Adam's memory (weights, gradients, two slots) and activations per sample.
  struct Totals {
    double parameters = 0;                   // trainable parameters
    double flops_per_sample = 0;             // forward + backward, per training sample
    double activation_bytes_per_sample = 0;  // default: 4 bytes per parameter / 1000 (a rough CNN ratio)
    double optimizer_slots = 2;              // Adam: 2; SGD with momentum: 1
  };
  static Workload from_totals(const Totals& totals);
};

}  // namespace nimbus::plan
