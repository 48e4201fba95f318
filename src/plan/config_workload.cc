#include "nimbus/plan/config_workload.h"

#include <set>
#include <string>

#include "nimbus/train/data_config.h"
#include "nimbus/train/input_cost.h"
#include "nimbus/train/memory_check.h"

namespace nimbus::plan {
namespace {

// The two micro-batches the step is traced at: small enough to trace in milliseconds, far enough apart
// to separate each kernel's fixed and per-sample cost.
constexpr int64_t kSmallTrace = 8;
constexpr int64_t kLargeTrace = 16;

StepTrace trace_at(const nlohmann::json& config, int64_t micro_batch) {
  const train::StepAnalysis step = train::analyze_train_step(config, micro_batch);
  StepTrace trace{.micro_batch = micro_batch,
                  .memory_bytes = static_cast<double>(step.memory.total()),
                  .parameter_bytes = static_cast<double>(step.memory.parameter_bytes),
                  .gradient_bytes = static_cast<double>(step.memory.gradient_bytes)};
  for (const graph::NodeCost& node : step.cost.nodes) {
    if (node.op.empty()) continue;
    trace.kernels.push_back({.unit = kernel_unit(node.op),
                             .flops = node.flops,
                             .bytes = static_cast<double>(node.bytes_read + node.bytes_written),
                             .op = node.key});
  }
  return trace;
}

}  // namespace

Unit kernel_unit(const std::string& op) {
  static const std::set<std::string> matmuls = {"matmul", "fused_matmul", "matmul_pair", "batch_matmul"};
  if (matmuls.contains(op)) return Unit::kMatmul;
  if (op.starts_with("conv2d") || op == "fused_conv2d" || op.starts_with("depthwise_conv2d")) {
    return Unit::kConvolution;
  }
  return Unit::kVector;
}

Workload workload_from_config(const nlohmann::json& config, bool jit) {
  nlohmann::json traced = config;
  traced["runtime"]["jit"] = jit;
  traced["runtime"]["graph"] = true;
  Workload work = Workload::from_two_traces(trace_at(traced, kSmallTrace), trace_at(traced, kLargeTrace));
  // Kernels whose cost does not grow with the batch touch only weights and optimizer state: the
  // update, which runs once per step however many micro-batches it accumulates.
  for (LinearKernel& kernel : work.kernels) {
    kernel.per_step = kernel.flops_per_sample == 0 && kernel.bytes_per_sample == 0;
  }
  work.name = config.at("model").value("name", std::string("model"));
  return work;
}

InputWork input_work_from_config(const nlohmann::json& config) {
  const nlohmann::json& batch = config.at("fit").at("batch_size");
  const train::InputCost cost =
      train::measure_input_cost(config, batch.is_number_integer() ? batch.get<int64_t>() : 128);
  return {.seconds_per_sample = cost.seconds_per_sample, .in_step = cost.in_training_thread};
}

int64_t training_samples(const nlohmann::json& config) {
  return train::split_example_count(config.at("data").at("train"));
}

}  // namespace nimbus::plan
