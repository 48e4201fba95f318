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

// The CPU attention kernels' per-thread scratch (attention_geometry.h), kept by each thread at the
// largest it has needed, apart from the fused kernels': a thread per task, up to `threads`.
uint64_t attention_workspace_bytes(const Graph& graph, int threads) {
  int64_t forward_floats = 0, forward_threads = 0, backward_floats = 0, backward_threads = 0;
  for (const Node& node : graph.nodes()) {
    if (node.removed || node.kind != NodeKind::kOp) continue;
    const bool is_forward = node.op->name == "scaled_dot_product_attention";
    if (!is_forward && node.op->name != "scaled_dot_product_attention_backward") continue;
    const Shape& q = graph.spec(node.inputs[is_forward ? 0 : 1]).shape;
    const Shape& v = graph.spec(node.inputs[is_forward ? 2 : 3]).shape;
    const int64_t batch_heads = q[0] * q[1];
    if (is_forward) {
      const int64_t blocks = (q[2] + internal::kAttentionQueryBlock - 1) / internal::kAttentionQueryBlock;
      forward_floats = std::max(forward_floats, internal::attention_forward_scratch_floats(q[3], v[3]));
      forward_threads = std::max(forward_threads, std::min<int64_t>(threads, batch_heads * blocks));
    } else {
      backward_floats = std::max(backward_floats, internal::attention_backward_scratch_floats(q[2], q[3], v[3]));
      backward_threads = std::max(backward_threads, std::min<int64_t>(threads, batch_heads));
    }
  }
  // One storage per thread for both ops, at the larger size where a thread ran both.
  int64_t floats = 0;
  for (int64_t t = 0; t < threads; ++t) {
    floats += std::max(t < forward_threads ? forward_floats : 0, t < backward_threads ? backward_floats : 0);
  }
  return static_cast<uint64_t>(floats) * sizeof(float);
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
