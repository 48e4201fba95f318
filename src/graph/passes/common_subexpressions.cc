// Common-subexpression elimination: two op nodes with the same op, attributes
// and inputs compute the same values, so later uses read the first. A read of
// a variable is keyed by how many assigns to it came before, so reads on
// either side of an update stay apart. Random and side-effecting ops never merge.
#include <map>
#include <tuple>

#include "nimbus/graph/passes.h"

namespace nimbus::graph {
namespace {

struct Key {
  const OpSchema* op;
  std::vector<std::pair<int, int>> inputs;
  std::vector<int> versions;  // per input: assigns to that capture so far (0 for other values)
  std::string attrs;
  auto tie() const { return std::tie(op, inputs, versions, attrs); }
  bool operator<(const Key& other) const { return tie() < other.tie(); }
};

}  // namespace

int eliminate_common_subexpressions(Graph& graph) {
  auto& nodes = graph.nodes();
  std::map<Key, int> first;
  std::map<int, int> assigns_so_far;  // capture node -> assigns before the current node
  int merged = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& node = nodes[i];
    if (node.removed || node.kind != NodeKind::kOp) continue;
    if (node.op->has_side_effects) {
      for (size_t k = 0; k < node.op->written_inputs(node.attrs); ++k) ++assigns_so_far[node.inputs[k].node];
      continue;
    }
    if (node.op->kind == OpKind::kRandom) continue;
    Key key{node.op, {}, {}, node.attrs.to_string()};
    for (const ValueRef& input : node.inputs) {
      key.inputs.emplace_back(input.node, input.output);
      auto it = assigns_so_far.find(input.node);
      key.versions.push_back(it == assigns_so_far.end() ? 0 : it->second);
    }
    auto [it, inserted] = first.try_emplace(key, static_cast<int>(i));
    if (inserted) continue;
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      graph.replace_uses({static_cast<int>(i), static_cast<int>(k)}, {it->second, static_cast<int>(k)});
    }
    node.removed = true;
    ++merged;
  }
  return merged;
}

}  // namespace nimbus::graph
