#include "nimbus/plan/workload.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "nimbus/base/error.h"

namespace nimbus::plan {
namespace {

bool is_mixed(Precision precision) { return precision != Precision::kFloat32; }

}  // namespace

std::string precision_name(Precision precision) {
  switch (precision) {
    case Precision::kFloat32: return "float32";
    case Precision::kMixedBfloat16: return "mixed_bfloat16";
    case Precision::kMixedFloat16: return "mixed_float16";
  }
  return "float32";
}

Precision precision_from_name(const std::string& name) {
  for (Precision precision : {Precision::kFloat32, Precision::kMixedBfloat16, Precision::kMixedFloat16}) {
    if (precision_name(precision) == name) return precision;
  }
  throw InvalidArgument(fmt::format("unknown precision '{}'", name),
                        "use float32, mixed_bfloat16 or mixed_float16 (Keras's policy names)");
}

std::vector<Kernel> Workload::kernels_at(int64_t micro_batch, Precision precision) const {
  // Under mixed precision the per-sample traffic (activations) moves in 2-byte types; weights and
  // optimizer state stay float32.
  const double activation_scale = is_mixed(precision) ? 0.5 : 1.0;
  const auto m = static_cast<double>(micro_batch);
  std::vector<Kernel> out;
  out.reserve(kernels.size());
  for (const LinearKernel& k : kernels) {
    out.push_back({.unit = k.unit,
                   .flops = k.flops_fixed + k.flops_per_sample * m,
                   .bytes = k.bytes_fixed + k.bytes_per_sample * m * activation_scale,
                   .per_step = k.per_step,
                   .op = k.op});
  }
  return out;
}

double Workload::memory_bytes(int64_t micro_batch, Precision precision) const {
  const auto m = static_cast<double>(micro_batch);
  if (!is_mixed(precision)) return memory_fixed_bytes + memory_per_sample_bytes * m;
  return memory_fixed_bytes + parameter_bytes / 2 + memory_per_sample_bytes * m / 2;
}

double Workload::flops_per_sample() const {
  double flops = 0;
  for (const LinearKernel& k : kernels) flops += k.flops_per_sample;
  return flops;
}

Workload Workload::from_two_traces(const StepTrace& small, const StepTrace& large) {
  if (small.micro_batch <= 0 || large.micro_batch <= small.micro_batch) {
    throw InvalidArgument(fmt::format("Workload::from_two_traces needs two micro-batches a < b, got {} and {}",
                                      small.micro_batch, large.micro_batch));
  }
  if (small.kernels.size() != large.kernels.size()) {
    throw InvalidArgument(fmt::format("the traces at micro-batches {} and {} differ: {} kernels against {}",
                                      small.micro_batch, large.micro_batch, small.kernels.size(),
                                      large.kernels.size()));
  }
  const auto span = static_cast<double>(large.micro_batch - small.micro_batch);
  const auto a = static_cast<double>(small.micro_batch);
  Workload work;
  for (size_t i = 0; i < small.kernels.size(); ++i) {
    const Kernel& s = small.kernels[i];
    const Kernel& l = large.kernels[i];
    LinearKernel k{.unit = s.unit, .per_step = s.per_step, .op = s.op};
    k.flops_per_sample = (l.flops - s.flops) / span;
    k.flops_fixed = s.flops - k.flops_per_sample * a;
    k.bytes_per_sample = (l.bytes - s.bytes) / span;
    k.bytes_fixed = s.bytes - k.bytes_per_sample * a;
    work.kernels.push_back(k);
  }
  work.parameter_bytes = small.parameter_bytes;
  work.gradient_bytes = small.gradient_bytes;
  work.memory_per_sample_bytes = (large.memory_bytes - small.memory_bytes) / span;
  work.memory_fixed_bytes = small.memory_bytes - work.memory_per_sample_bytes * a;
  return work;
}

Workload Workload::from_totals(const Totals& totals) {
  for (const auto& [what, value] :
       {std::pair{"parameters", totals.parameters}, std::pair{"training FLOPs per sample", totals.flops_per_sample}}) {
    if (!std::isfinite(value) || value <= 0) {
      throw InvalidArgument(
          fmt::format("a model given by totals has {} {}: it needs a finite number above 0", value, what),
          "give --params and --flops-per-sample as positive numbers, e.g. --params 25e6");
    }
  }
  const double parameter_bytes = 4 * totals.parameters;
  Workload work;
  work.name = fmt::format("{:.3g} parameters, {:.3g} FLOP per sample", totals.parameters, totals.flops_per_sample);
  // The forward and backward passes read the weights three times (forward, both gradients) and write
  // the gradients; the optimizer reads and writes weights, gradients and slots once per step.
  work.kernels.push_back({.unit = Unit::kMatmul,
                          .flops_per_sample = totals.flops_per_sample,
                          .bytes_fixed = 4 * parameter_bytes,
                          .bytes_per_sample = 0});
  work.kernels.push_back({.unit = Unit::kVector,
                          .flops_fixed = 10 * totals.parameters,
                          .bytes_fixed = parameter_bytes * (2 + 2 * totals.optimizer_slots) + parameter_bytes,
                          .per_step = true});
  const double activations =
      totals.activation_bytes_per_sample > 0 ? totals.activation_bytes_per_sample : parameter_bytes / 1000;
  work.kernels.push_back({.unit = Unit::kVector, .bytes_per_sample = 2 * activations});
  work.parameter_bytes = parameter_bytes;
  work.gradient_bytes = parameter_bytes;
  work.memory_fixed_bytes = parameter_bytes * (2 + totals.optimizer_slots);
  work.memory_per_sample_bytes = activations;
  return work;
}

}  // namespace nimbus::plan
