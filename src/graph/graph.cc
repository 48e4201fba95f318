#include "nimbus/graph/graph.h"

#include <fmt/format.h>

#include "nimbus/base/error.h"

namespace nimbus::graph {

std::string spec_to_string(const TensorSpec& spec) {
  return fmt::format("{}{}", dtype_name(spec.dtype), spec.shape.to_string());
}

bool Node::has_side_effects() const {
  if (kind == NodeKind::kOp && op->has_side_effects) return true;
  for (int target : writes_into) {
    if (target >= 0) return true;
  }
  return false;
}

int Graph::add_argument(int index, const TensorSpec& spec) {
  Node node;
  node.kind = NodeKind::kArgument;
  node.outputs = {spec};
  node.argument = index;
  nodes_.push_back(std::move(node));
  return static_cast<int>(nodes_.size()) - 1;
}

int Graph::add_capture(const Tensor& tensor, std::string name, bool trainable) {
  Node node;
  node.kind = NodeKind::kCapture;
  node.outputs = {{tensor.shape(), tensor.dtype()}};
  node.value = tensor;
  node.name = std::move(name);
  node.trainable = trainable;
  nodes_.push_back(std::move(node));
  return static_cast<int>(nodes_.size()) - 1;
}

int Graph::add_constant(const Tensor& value) {
  Node node;
  node.kind = NodeKind::kConstant;
  node.outputs = {{value.shape(), value.dtype()}};
  node.value = value;
  nodes_.push_back(std::move(node));
  return static_cast<int>(nodes_.size()) - 1;
}

int Graph::add_op(const OpSchema& op, const Attrs& attrs, std::vector<ValueRef> inputs,
                  std::vector<TensorSpec> outputs) {
  for (const ValueRef& input : inputs) {
    NIMBUS_ASSERT(input.node >= 0 && input.node < static_cast<int>(nodes_.size()))
        << op.name << " reads %" << input.node << ", which is not (yet) in the graph";
  }
  Node node;
  node.kind = NodeKind::kOp;
  node.op = &op;
  node.attrs = attrs;
  node.inputs = std::move(inputs);
  node.outputs = std::move(outputs);
  nodes_.push_back(std::move(node));
  return static_cast<int>(nodes_.size()) - 1;
}

int Graph::add_node(Node node) {
  for (const ValueRef& input : node.inputs) {
    NIMBUS_ASSERT(input.node >= 0 && input.node < static_cast<int>(nodes_.size()))
        << "a node reads %" << input.node << ", which is not (yet) in the graph";
  }
  nodes_.push_back(std::move(node));
  return static_cast<int>(nodes_.size()) - 1;
}

void Graph::replace_uses(ValueRef from, ValueRef to) {
  for (Node& node : nodes_) {
    for (ValueRef& input : node.inputs) {
      if (input == from) input = to;
    }
  }
  for (ValueRef& output : outputs_) {
    if (output == from) output = to;
  }
}

void Graph::compact() {
  std::vector<int> new_id(nodes_.size(), -1);
  std::vector<Node> kept;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].removed) continue;
    new_id[i] = static_cast<int>(kept.size());
    kept.push_back(std::move(nodes_[i]));
  }
  auto remap = [&](ValueRef& value) {
    NIMBUS_ASSERT(new_id[static_cast<size_t>(value.node)] >= 0) << "a removed node %" << value.node << " is still used";
    value.node = new_id[static_cast<size_t>(value.node)];
  };
  for (Node& node : kept) {
    for (ValueRef& input : node.inputs) remap(input);
    for (int& target : node.writes_into) {
      if (target >= 0) target = new_id[static_cast<size_t>(target)];
    }
  }
  for (ValueRef& output : outputs_) remap(output);
  nodes_ = std::move(kept);
}

int Graph::op_count() const {
  int count = 0;
  for (const Node& node : nodes_) count += node.kind == NodeKind::kOp && !node.removed;
  return count;
}

namespace {

std::string value_name(ValueRef value, const Graph& graph) {
  return graph.node(value.node).outputs.size() == 1 ? fmt::format("%{}", value.node)
                                                    : fmt::format("%{}.{}", value.node, value.output);
}

std::string output_specs(const Node& node) {
  std::vector<std::string> specs;
  for (const TensorSpec& spec : node.outputs) specs.push_back(spec_to_string(spec));
  return specs.size() == 1 ? specs[0] : fmt::format("({})", fmt::join(specs, ", "));
}

std::string describe(const Node& node, const Graph& graph) {
  switch (node.kind) {
    case NodeKind::kArgument: return fmt::format("argument {}", node.argument);
    case NodeKind::kCapture: return node.name.empty() ? "capture" : fmt::format("capture \"{}\"", node.name);
    case NodeKind::kConstant: return "constant";
    case NodeKind::kOp: break;
  }
  std::vector<std::string> inputs;
  for (const ValueRef& input : node.inputs) inputs.push_back(value_name(input, graph));
  const std::string attrs = node.attrs.entries().empty() ? "" : fmt::format(" {{{}}}", node.attrs.to_string());
  return fmt::format("{}({}){}", node.op->name, fmt::join(inputs, ", "), attrs);
}

}  // namespace

std::string Graph::to_text(const std::string& name) const {
  std::string out = fmt::format("graph {} {{\n", name);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    if (node.removed) continue;
    if (node.outputs.empty()) {
      out += fmt::format("  {}\n", describe(node, *this));
      continue;
    }
    std::string into;
    for (size_t k = 0; k < node.writes_into.size(); ++k) {
      if (node.writes_into[k] < 0) continue;
      const Node& target = nodes_[static_cast<size_t>(node.writes_into[k])];
      into += fmt::format(" ; output {} into %{}{}", k, node.writes_into[k],
                          target.name.empty() ? "" : fmt::format(" \"{}\"", target.name));
    }
    out += fmt::format("  %{} = {} : {}{}\n", i, describe(node, *this), output_specs(node), into);
  }
  std::vector<std::string> results;
  for (const ValueRef& output : outputs_) results.push_back(value_name(output, *this));
  out += fmt::format("  return {}\n}}\n", fmt::join(results, ", "));
  return out;
}

std::string Graph::to_dot(const std::string& name) const {
  std::string out = fmt::format("digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box, fontname=monospace];\n", name);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    if (node.removed) continue;
    const char* style = node.kind == NodeKind::kOp ? "" : ", style=filled, fillcolor=lightgrey";
    const std::string label = node.kind == NodeKind::kOp ? node.op->name : describe(node, *this);
    out += fmt::format("  n{} [label=\"%{} {}\\n{}\"{}];\n", i, i, label, output_specs(node), style);
    for (const ValueRef& input : node.inputs) out += fmt::format("  n{} -> n{};\n", input.node, i);
  }
  for (size_t k = 0; k < outputs_.size(); ++k) {
    out += fmt::format("  out{} [label=\"output {}\", shape=ellipse];\n  n{} -> out{};\n", k, k, outputs_[k].node, k);
  }
  out += "}\n";
  return out;
}

int capture_of(const Graph& graph, ValueRef value) {
  for (;;) {
    const Node& node = graph.node(value.node);
    if (node.kind == NodeKind::kCapture) return value.node;
    if (node.kind != NodeKind::kOp || !node.op->output_aliases_input) return -1;
    value = node.inputs[0];
  }
}

std::map<std::pair<int, int>, int> reader_counts(const Graph& graph) {
  std::map<std::pair<int, int>, int> counts;
  for (const Node& node : graph.nodes()) {
    if (node.removed) continue;
    for (const ValueRef& input : node.inputs) ++counts[{input.node, input.output}];
  }
  for (const ValueRef& output : graph.outputs()) ++counts[{output.node, output.output}];
  return counts;
}

}  // namespace nimbus::graph
