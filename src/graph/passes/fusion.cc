// Elementwise fusion. Walks the graph in order and grows clusters of
// elementwise ops that share an output shape; a cluster closes as soon as a
// node outside it reads one of its values, or a side-effecting node runs.
// Because of that rule, moving every member to the position of the cluster's
// last member never moves a computation past one of its readers or past a
// variable update, and no cycle can form. Clusters of two or more ops become
// fused_elementwise nodes; their outputs are the members' values read outside.
#include <map>
#include <memory>

#include "nimbus/graph/passes.h"
#include "nimbus/ops/fused_elementwise.h"

namespace nimbus::graph {
namespace {

bool fusible_dtype(DType dtype) { return dtype == DType::kF32 || dtype == DType::kBool; }

bool fusible(const Node& node, const Graph& graph) {
  if (node.removed || node.kind != NodeKind::kOp) return false;
  const OpSchema& op = *node.op;
  if (op.kind != OpKind::kElementwise || op.has_side_effects || op.output_aliases_input || op.name == "cast" ||
      &op == &fused_elementwise_op() || node.outputs.size() != 1 || !fusible_dtype(node.outputs[0].dtype)) {
    return false;
  }
  for (const ValueRef& input : node.inputs) {
    if (!fusible_dtype(graph.spec(input).dtype)) return false;
  }
  return true;
}

struct Cluster {
  Shape shape;
  std::vector<int> members;
  bool open = true;
};

}  // namespace

int fuse_elementwise(Graph& graph) {
  auto& nodes = graph.nodes();
  std::vector<int> cluster_of(nodes.size(), -1);
  std::vector<Cluster> clusters;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = nodes[i];
    if (node.removed || node.kind != NodeKind::kOp) continue;
    int joined = -1;
    if (fusible(node, graph)) {
      for (const ValueRef& input : node.inputs) {
        const int c = cluster_of[static_cast<size_t>(input.node)];
        if (c >= 0 && clusters[static_cast<size_t>(c)].open &&
            clusters[static_cast<size_t>(c)].shape == node.outputs[0].shape) {
          joined = c;
          break;
        }
      }
    }
    // A reader outside a cluster closes it.
    for (const ValueRef& input : node.inputs) {
      const int c = cluster_of[static_cast<size_t>(input.node)];
      if (c >= 0 && c != joined) clusters[static_cast<size_t>(c)].open = false;
    }
    if (node.op->has_side_effects) {
      for (Cluster& cluster : clusters) cluster.open = false;
    }
    if (!fusible(node, graph)) continue;
    if (joined < 0) {
      joined = static_cast<int>(clusters.size());
      clusters.push_back({.shape = node.outputs[0].shape});
    }
    clusters[static_cast<size_t>(joined)].members.push_back(static_cast<int>(i));
    cluster_of[i] = joined;
  }

  // Which member values are read outside their cluster (or are graph outputs).
  std::map<std::pair<int, int>, bool> escapes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].removed) continue;
    for (const ValueRef& input : nodes[i].inputs) {
      const int c = cluster_of[static_cast<size_t>(input.node)];
      if (c >= 0 && c != cluster_of[i]) escapes[{input.node, input.output}] = true;
    }
  }
  for (const ValueRef& output : graph.outputs()) escapes[{output.node, output.output}] = true;

  // Rebuild the graph with each cluster of two or more replaced by one fused node.
  Graph fused;
  std::vector<std::vector<ValueRef>> moved(nodes.size());
  auto remap = [&](ValueRef v) { return moved[static_cast<size_t>(v.node)][static_cast<size_t>(v.output)]; };
  int made = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = nodes[i];
    if (node.removed) continue;
    const int c = cluster_of[i];
    const bool in_cluster = c >= 0 && clusters[static_cast<size_t>(c)].members.size() >= 2;
    if (!in_cluster) {
      Node copy = node;
      for (ValueRef& input : copy.inputs) input = remap(input);
      const int id = fused.add_node(std::move(copy));
      for (size_t k = 0; k < node.outputs.size(); ++k) moved[i].push_back({id, static_cast<int>(k)});
      continue;
    }
    const Cluster& cluster = clusters[static_cast<size_t>(c)];
    if (static_cast<int>(i) != cluster.members.back()) continue;

    auto program = std::make_shared<ExpressionProgram>();
    std::vector<ValueRef> inputs;  // in the fused graph
    std::map<std::pair<int, int>, int> input_index;
    std::map<int, int> instruction_of;  // member node -> instruction
    std::vector<TensorSpec> output_specs;
    std::vector<int> escaping_members;
    for (int member : cluster.members) {
      const Node& m = nodes[static_cast<size_t>(member)];
      ExpressionInstruction instruction{.op = m.op, .attrs = m.attrs, .dtype = m.outputs[0].dtype};
      for (const ValueRef& input : m.inputs) {
        if (cluster_of[static_cast<size_t>(input.node)] == c) {
          instruction.operands.push_back({.is_input = false, .index = instruction_of.at(input.node)});
          continue;
        }
        auto [it, added] = input_index.try_emplace({input.node, input.output}, static_cast<int>(inputs.size()));
        if (added) inputs.push_back(remap(input));
        instruction.operands.push_back({.is_input = true, .index = it->second});
      }
      instruction_of[member] = static_cast<int>(program->instructions.size());
      program->instructions.push_back(std::move(instruction));
      if (escapes.count({member, 0}) != 0) {
        program->outputs.push_back(instruction_of[member]);
        output_specs.push_back(m.outputs[0]);
        escaping_members.push_back(member);
      }
    }
    const int id =
        fused.add_op(fused_elementwise_op(), Attrs{{"program", AttrObjectPtr(program)}, {"shape", cluster.shape}},
                     std::move(inputs), std::move(output_specs));
    for (size_t k = 0; k < escaping_members.size(); ++k) {
      moved[static_cast<size_t>(escaping_members[k])] = {{id, static_cast<int>(k)}};
    }
    ++made;
  }
  for (const ValueRef& output : graph.outputs()) fused.outputs().push_back(remap(output));
  graph = std::move(fused);
  return made;
}

}  // namespace nimbus::graph
