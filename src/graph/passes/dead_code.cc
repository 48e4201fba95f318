// Dead-code elimination: a node stays if a graph output or a side-effecting
// node (assign) depends on it.
#include "nimbus/graph/passes.h"

namespace nimbus::graph {

int eliminate_dead_code(Graph& graph) {
  auto& nodes = graph.nodes();
  std::vector<bool> live(nodes.size(), false);
  for (const ValueRef& output : graph.outputs()) live[static_cast<size_t>(output.node)] = true;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i].removed && nodes[i].has_side_effects()) live[i] = true;
  }
  // Nodes only read earlier nodes, so one backward sweep propagates liveness.
  for (size_t i = nodes.size(); i-- > 0;) {
    if (!live[i] || nodes[i].removed) continue;
    for (const ValueRef& input : nodes[i].inputs) live[static_cast<size_t>(input.node)] = true;
  }
  int removed = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    // Arguments stay so that argument indices keep matching the call.
    if (!live[i] && !nodes[i].removed && nodes[i].kind != NodeKind::kArgument) {
      nodes[i].removed = true;
      ++removed;
    }
  }
  return removed;
}

}  // namespace nimbus::graph
