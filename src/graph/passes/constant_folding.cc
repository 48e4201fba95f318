// Constant folding: an op whose inputs are all constants (including source
// ops like fill, which have none) runs once at optimization time and becomes
// a constant. Captured tensors are not constants: variables change between
// runs. Random and side-effecting ops never fold.
#include <algorithm>

#include "nimbus/graph/passes.h"
#include "nimbus/ops/dispatch.h"

namespace nimbus::graph {
namespace {
// Folding trades compute for memory the graph keeps as long as it lives, outside the memory plan's arena
// (and outside the memory accounting's activations); past this size it is not worth it.
constexpr int64_t kMaxFoldedElements = int64_t{1} << 22;
// A result larger than every input (a fill or a broadcast to an activation's shape, as gradient rules make)
// would hold that memory for a kernel that costs next to nothing: it folds only up to this size (64 KiB of f32).
constexpr int64_t kMaxGrownElements = int64_t{1} << 14;
}  // namespace

int fold_constants(Graph& graph, Device device) {
  int folded = 0;
  auto& nodes = graph.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& node = nodes[i];
    if (node.removed || node.kind != NodeKind::kOp || node.op->kind == OpKind::kRandom || node.op->has_side_effects ||
        node.outputs.size() != 1 || node.outputs[0].shape.numel() > kMaxFoldedElements) {
      continue;
    }
    std::vector<Tensor> inputs;
    bool all_constant = true;
    for (const ValueRef& input : node.inputs) {
      const Node& producer = graph.node(input.node);
      all_constant = all_constant && producer.kind == NodeKind::kConstant;
      if (all_constant) inputs.push_back(producer.value);
    }
    if (!all_constant) continue;
    int64_t largest_input = 0;
    for (const Tensor& input : inputs) largest_input = std::max(largest_input, input.numel());
    if (node.outputs[0].shape.numel() > std::max(kMaxGrownElements, largest_input)) continue;
    // Computed where its inputs are (the CPU for a source op), kept where the graph runs.
    const Device where = inputs.empty() ? Device::cpu() : inputs[0].device();
    const Tensor value = call_op(*node.op, std::span<const Tensor>(inputs), node.attrs, where)[0].to(device);
    node.kind = NodeKind::kConstant;
    node.op = nullptr;
    node.inputs.clear();
    node.attrs = {};
    node.value = value;
    ++folded;
  }
  return folded;
}

}  // namespace nimbus::graph
