// Elementwise fusion. Walks the graph in order and grows clusters of
// elementwise ops that share an output shape; a cluster closes as soon as a
// node outside it reads one of its values, or an update of a variable one of
// its members reads. Because of that rule, moving every member to the
// position of the cluster's last member never moves a computation past one of
// its readers or past an update of what it reads, and no cycle can form. A node
// does not join a cluster whose last member precedes a non-fusible kernel
// (moves_past_other_work), so fusion never stretches lifetimes across work. Clusters of two or more ops become
// fused_elementwise nodes; their outputs are the members' values read outside.
#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "nimbus/graph/passes.h"
#include "nimbus/ops/fused_elementwise.h"

namespace nimbus::graph {
namespace {

// f16 and bf16 join so that mixed precision's casts fuse with the ops around them (no pass of their own).
bool fusible_dtype(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 || dtype == DType::kBool;
}

bool fusible(const Node& node, const Graph& graph) {
  if (node.removed || node.kind != NodeKind::kOp) return false;
  const OpSchema& op = *node.op;
  if (op.kind != OpKind::kElementwise || op.has_side_effects || op.output_aliases_input ||
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
  std::set<int> captures_read;  // capture nodes the members read (directly or through views)
  bool open = true;
};

// Joining a cluster moves its members to the joining node. If a kernel that is not fusible (a matmul, a
// convolution, a reduction) runs between the cluster's last member and the node, the move would keep the
// members' inputs alive across that work: a gradient accumulation g1 + g2 + g3 ... fused into one node would
// hold every micro-batch's g until the last. Such a node starts a cluster of its own instead, unless the
// cluster's inputs are smaller than its values the node reads: then the move holds less memory across that
// work, not more (mixed precision's cast of a bf16 gradient to f32 moves into the optimizer's update, so
// the bf16 gradient waits instead of its f32 copy, and the cast costs no pass of its own).
// `kernels_before[i]`: non-fusible kernels (views aside) at positions before i.
bool moves_past_other_work(const Cluster& cluster, const Graph& graph, size_t node,
                           const std::vector<int>& kernels_before, const std::vector<int>& cluster_of, int c) {
  const auto last = static_cast<size_t>(*std::max_element(cluster.members.begin(), cluster.members.end()));
  if (kernels_before[node] <= kernels_before[last + 1]) return false;
  const auto bytes = [&](ValueRef value) {
    const TensorSpec& spec = graph.spec(value);
    return spec.shape.numel() * static_cast<int64_t>(dtype_size(spec.dtype));
  };
  std::set<std::pair<int, int>> inputs;
  int64_t input_bytes = 0;
  for (int member : cluster.members) {
    for (const ValueRef& input : graph.nodes()[static_cast<size_t>(member)].inputs) {
      if (cluster_of[static_cast<size_t>(input.node)] == c || !inputs.insert({input.node, input.output}).second) {
        continue;
      }
      input_bytes += bytes(input);
    }
  }
  std::set<std::pair<int, int>> read;
  int64_t read_bytes = 0;
  for (const ValueRef& input : graph.nodes()[node].inputs) {
    if (cluster_of[static_cast<size_t>(input.node)] == c && read.insert({input.node, input.output}).second) {
      read_bytes += bytes(input);
    }
  }
  return input_bytes >= read_bytes;
}

}  // namespace

int fuse_elementwise(Graph& graph) {
  auto& nodes = graph.nodes();
  std::vector<int> cluster_of(nodes.size(), -1);
  std::vector<Cluster> clusters;
  std::vector<int> kernels_before(nodes.size() + 1, 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = nodes[i];
    const bool kernel = !node.removed && node.kind == NodeKind::kOp && !node.op->output_aliases_input;
    kernels_before[i + 1] = kernels_before[i] + (kernel && !fusible(node, graph) ? 1 : 0);
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = nodes[i];
    if (node.removed || node.kind != NodeKind::kOp) continue;
    int joined = -1;
    if (fusible(node, graph)) {
      // Join the open clusters of this shape that the node reads, merging them if there are
      // several: an open cluster has no readers outside it, so its members can move together.
      for (const ValueRef& input : node.inputs) {
        const int c = cluster_of[static_cast<size_t>(input.node)];
        Cluster& candidate = clusters[static_cast<size_t>(std::max(c, 0))];
        if (c < 0 || c == joined || !candidate.open || candidate.shape != node.outputs[0].shape) continue;
        if (moves_past_other_work(candidate, graph, i, kernels_before, cluster_of, c)) continue;
        if (joined < 0) {
          joined = c;
          continue;
        }
        Cluster& target = clusters[static_cast<size_t>(joined)];
        for (int member : candidate.members) cluster_of[static_cast<size_t>(member)] = joined;
        target.members.insert(target.members.end(), candidate.members.begin(), candidate.members.end());
        std::sort(target.members.begin(), target.members.end());
        target.captures_read.insert(candidate.captures_read.begin(), candidate.captures_read.end());
        candidate.members.clear();
        candidate.open = false;
      }
    }
    // A reader outside a cluster closes it.
    for (const ValueRef& input : node.inputs) {
      const int c = cluster_of[static_cast<size_t>(input.node)];
      if (c >= 0 && c != joined) clusters[static_cast<size_t>(c)].open = false;
    }
    // An update of a variable closes the clusters that read it: their members
    // must not move past the update. Other side effects close everything.
    if (node.op->name == "assign") {
      const int target = capture_of(graph, node.inputs[0]);
      for (Cluster& cluster : clusters) {
        if (target < 0 || cluster.captures_read.count(target) != 0) cluster.open = false;
      }
    } else if (node.op->has_side_effects) {
      for (Cluster& cluster : clusters) cluster.open = false;
    }
    if (!fusible(node, graph)) continue;
    if (joined < 0) {
      joined = static_cast<int>(clusters.size());
      clusters.push_back({.shape = node.outputs[0].shape});
    }
    Cluster& cluster = clusters[static_cast<size_t>(joined)];
    cluster.members.push_back(static_cast<int>(i));
    for (const ValueRef& input : node.inputs) {
      const int capture = capture_of(graph, input);
      if (capture >= 0) cluster.captures_read.insert(capture);
    }
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
