#include "nimbus/graph/memory_estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "nimbus/base/size_units.h"
#include "nimbus/device/runtime.h"
#include "nimbus/graph/cost.h"
#include "nimbus/ops/for_kernels/attention_geometry.h"
#include "nimbus/ops/fused_elementwise.h"

namespace nimbus::graph {

uint64_t MemoryEstimate::total() const {
  return parameter_bytes + gradient_bytes + optimizer_state_bytes + master_weight_bytes + activation_bytes +
         workspace_bytes + input_bytes + output_bytes + framework_reserve_bytes;
}

uint64_t MemoryEstimate::step_bytes() const {
  return gradient_bytes + activation_bytes + workspace_bytes + input_bytes + output_bytes;
}

std::string MemoryEstimate::to_string() const {
  const std::vector<std::pair<const char*, uint64_t>> terms = {{"parameters", parameter_bytes},
                                                               {"gradients", gradient_bytes},
                                                               {"optimizer state", optimizer_state_bytes},
                                                               {"master weights", master_weight_bytes},
                                                               {"activations", activation_bytes},
                                                               {"workspace", workspace_bytes},
                                                               {"inputs", input_bytes},
                                                               {"outputs", output_bytes},
                                                               {"framework reserve", framework_reserve_bytes}};
  std::string text;
  for (const auto& [name, bytes] : terms) {
    if (bytes == 0) continue;
    text += fmt::format("{}{} {}", text.empty() ? "" : " + ", name, format_bytes(bytes));
  }
  return fmt::format("{} = {}", text.empty() ? "nothing" : text, format_bytes(total()));
}

namespace {

// The fused elementwise kernels' per-thread scratch, which each thread keeps at the largest it has
// needed: one thread runs a fused node of one block, every compute thread runs larger ones.
uint64_t workspace_bytes(const Graph& graph, int threads) {
  uint64_t any = 0, parallel = 0;
  for (const Node& node : graph.nodes()) {
    if (node.removed || node.kind != NodeKind::kOp || node.op != &fused_elementwise_op()) continue;
    const auto& program = static_cast<const ExpressionProgram&>(*node.attrs.get_object("program"));
    std::vector<TensorSpec> inputs;
    for (const ValueRef& input : node.inputs) inputs.push_back(graph.spec(input));
    const Shape& shape = node.attrs.get_shape("shape");
    const uint64_t scratch = fused_elementwise_scratch_bytes(program, inputs, shape);
    any = std::max(any, scratch);
    if (shape.numel() > kFusedBlockElements) parallel = std::max(parallel, scratch);
  }
  return any + static_cast<uint64_t>(std::max(threads - 1, 0)) * parallel;
}

// The CPU attention kernels' scratch (attention_geometry.h): a call takes it from the allocator for
// its threads (a thread per task, up to `threads`) and returns it at its end, while the planned arena
// is in use: the largest call's.
uint64_t attention_workspace_bytes(const Graph& graph, int threads) {
  int64_t largest = 0;
  for (const Node& node : graph.nodes()) {
    if (node.removed || node.kind != NodeKind::kOp) continue;
    const bool is_forward = node.op->name == "scaled_dot_product_attention";
    if (!is_forward && node.op->name != "scaled_dot_product_attention_backward") continue;
    const Shape& q = graph.spec(node.inputs[is_forward ? 0 : 1]).shape;
    const Shape& v = graph.spec(node.inputs[is_forward ? 2 : 3]).shape;
    const int64_t batch_heads = q[0] * q[1];
    const int64_t blocks = (q[2] + internal::kAttentionQueryBlock - 1) / internal::kAttentionQueryBlock;
    const int64_t floats = is_forward ? internal::attention_forward_scratch_floats(q[3], v[3])
                                      : internal::attention_backward_scratch_floats(q[2], q[3], v[3]);
    const int64_t tasks = is_forward ? batch_heads * blocks : batch_heads;
    largest = std::max(largest, floats * std::min<int64_t>(threads, tasks));
  }
  return static_cast<uint64_t>(largest) * sizeof(float);
}

}  // namespace

MemoryEstimate estimate_memory(const Graph& graph, const MemoryPlan& plan, const MemoryEstimateOptions& options) {
  const GraphCost cost = graph_cost(graph, plan);
  MemoryEstimate estimate;
  estimate.parameter_bytes = cost.parameter_bytes;
  estimate.optimizer_state_bytes = cost.state_bytes;
  // The gradients are intermediates of the step: the plan puts them in the arena, all live together
  // before the updates (which the passes move to the end), so the arena holds at least their bytes.
  estimate.gradient_bytes = std::min(cost.gradient_bytes, plan.arena_bytes);
  estimate.activation_bytes = plan.arena_bytes - estimate.gradient_bytes;
  estimate.input_bytes = cost.input_bytes;
  estimate.output_bytes = cost.output_bytes;
  const int threads = options.threads > 0 ? options.threads : compute_threads();
  estimate.workspace_bytes = workspace_bytes(graph, threads) + attention_workspace_bytes(graph, threads);
  estimate.framework_reserve_bytes = options.framework_reserve_bytes;
  if (options.master_weights) {
    for (const Node& node : graph.nodes()) {
      if (!node.removed && node.kind == NodeKind::kCapture && node.trainable) {
        estimate.master_weight_bytes += static_cast<uint64_t>(node.outputs[0].shape.numel()) * dtype_size(DType::kF32);
      }
    }
  }
  return estimate;
}

}  // namespace nimbus::graph
