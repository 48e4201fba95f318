// In-place updates: assign(variable, value) copies `value` into the
// variable's memory. When the op that computes `value` can write it there
// directly, the copy (and the buffer holding `value`) disappear: the op's
// output becomes the variable itself.
//
// Safe when, for assign(c, (P, k)) with c a capture:
//   - only the assign reads output k of P, and no other output of P is
//     written into c;
//   - nothing between P and the assign reads c or a view of it (it would see
//     the new value early) or writes c;
//   - if P itself reads c, P is elementwise: each element is read before the
//     same element is written.
#include <algorithm>
#include <map>

#include "nimbus/graph/passes.h"

namespace nimbus::graph {
namespace {

bool touches(const Graph& graph, const Node& node, int capture) {
  for (const ValueRef& input : node.inputs) {
    if (capture_of(graph, input) == capture) return true;
  }
  for (int target : node.writes_into) {
    if (target == capture) return true;
  }
  return false;
}

}  // namespace

int update_in_place(Graph& graph) {
  auto& nodes = graph.nodes();
  // Readers of each value, and graph outputs, decide whether an output is private to its assign.
  std::map<std::pair<int, int>, int> readers = reader_counts(graph);

  int folded = 0;
  for (size_t a = 0; a < nodes.size(); ++a) {
    Node& assign = nodes[a];
    if (assign.removed || assign.kind != NodeKind::kOp || assign.op->name != "assign") continue;
    const int capture = assign.inputs[0].node;
    const ValueRef value = assign.inputs[1];
    if (graph.node(capture).kind != NodeKind::kCapture) continue;
    Node& producer = nodes[static_cast<size_t>(value.node)];
    // A producer may already write other outputs into other variables (a
    // fused optimizer step updates a weight and its slots), never two into one.
    const bool writes_capture_already =
        std::find(producer.writes_into.begin(), producer.writes_into.end(), capture) != producer.writes_into.end();
    if (producer.kind != NodeKind::kOp || producer.op->has_side_effects || writes_capture_already ||
        readers[{value.node, value.output}] != 1) {
      continue;
    }
    if (touches(graph, producer, capture) && producer.op->kind != OpKind::kElementwise) continue;
    bool clear = true;
    for (size_t between = static_cast<size_t>(value.node) + 1; clear && between < a; ++between) {
      clear = nodes[between].removed || !touches(graph, nodes[between], capture);
    }
    if (!clear) continue;
    producer.writes_into.resize(producer.outputs.size(), -1);
    producer.writes_into[static_cast<size_t>(value.output)] = capture;
    assign.removed = true;
    ++folded;
  }
  return folded;
}

}  // namespace nimbus::graph
