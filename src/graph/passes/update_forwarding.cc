// Update forwarding: after assign(v, x), later reads of v read x instead, and
// the assigns move to the end of the graph. Values are unchanged (a read of v
// after the assign saw x anyway), but the computations no longer wait on
// the updates: an optimizer's chains for one parameter (Adam's m, v and the
// weight) become one elementwise cluster that fusion turns into one kernel,
// whose outputs in-place updates then write straight into the variables.
//
// Skipped (returns 0) where moving an update could change what a read sees:
// an assign to something other than a capture, an op output already written
// into a capture, a read through a view (reshape) of an updated variable
// after its update, or another op that writes in place (adam_update) into a
// variable that an assign updates too (its target must stay the variable, and
// the assign must not move past it).
#include <map>
#include <set>

#include "nimbus/graph/passes.h"

namespace nimbus::graph {
namespace {

bool is_assign(const Node& node) { return !node.removed && node.kind == NodeKind::kOp && node.op->name == "assign"; }

bool safe_to_forward(const Graph& graph) {
  std::set<int> assigned;
  for (const Node& node : graph.nodes()) {
    if (is_assign(node)) assigned.insert(capture_of(graph, node.inputs[0]));
  }
  for (const Node& node : graph.nodes()) {
    if (node.removed || node.kind != NodeKind::kOp || is_assign(node)) continue;
    for (size_t k = 0; k < node.op->written_inputs(node.attrs); ++k) {
      if (assigned.count(capture_of(graph, node.inputs[k])) != 0) return false;
    }
  }
  std::map<int, bool> updated;
  for (const Node& node : graph.nodes()) {
    if (node.removed || node.kind != NodeKind::kOp) continue;
    for (int target : node.writes_into) {
      if (target >= 0) return false;
    }
    for (const ValueRef& input : node.inputs) {
      const int capture = capture_of(graph, input);
      if (capture >= 0 && capture != input.node && updated[capture]) return false;
    }
    if (is_assign(node)) {
      if (graph.node(node.inputs[0].node).kind != NodeKind::kCapture) return false;
      updated[node.inputs[0].node] = true;
    }
  }
  return true;
}

}  // namespace

int forward_updates(Graph& graph) {
  if (!safe_to_forward(graph)) return 0;
  auto& nodes = graph.nodes();
  std::map<int, ValueRef> current;  // an updated capture -> the value it holds now
  int forwarded = 0;
  bool has_updates = false;
  for (Node& node : nodes) {
    if (node.removed || node.kind != NodeKind::kOp) continue;
    // An assign's target stays: it names the variable to write.
    for (size_t k = is_assign(node) ? 1 : 0; k < node.inputs.size(); ++k) {
      auto it = current.find(node.inputs[k].node);
      if (it == current.end()) continue;
      node.inputs[k] = it->second;
      ++forwarded;
    }
    if (is_assign(node)) {
      current[node.inputs[0].node] = node.inputs[1];
      has_updates = true;
    }
  }
  if (!has_updates) return 0;

  // Sink the assigns, keeping their order: nothing reads a variable after its update any more.
  Graph sunk;
  std::vector<int> moved(nodes.size(), -1);
  const auto copy = [&](size_t i) {
    Node node = nodes[i];
    for (ValueRef& input : node.inputs) input.node = moved[static_cast<size_t>(input.node)];
    moved[i] = sunk.add_node(std::move(node));
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i].removed && !is_assign(nodes[i])) copy(i);
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (is_assign(nodes[i])) copy(i);
  }
  for (const ValueRef& output : graph.outputs()) {
    sunk.outputs().push_back({moved[static_cast<size_t>(output.node)], output.output});
  }
  graph = std::move(sunk);
  return forwarded;
}

}  // namespace nimbus::graph
