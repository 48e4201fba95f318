// Epilogue fusion (part of the JIT switch): matmul -> add(bias) -> activation
// becomes one fused_matmul node, and a channels-last conv2d -> add(bias) ->
// activation one fused_conv2d node, which oneDNN runs with a bias operand and
// an eltwise post-op while the output is in cache.
//
// A matmul or convolution qualifies when its only reader is an add of a 1-D
// bias over its last axis; the activation joins when it is the add's only reader (relu's
// gradient reads relu's output, so in a training step the pre-activation has
// no other reader). The fused node takes the place of the last op it
// replaces, after every input it reads; nothing with side effects may run in
// between (it could update a weight the product read).
#include <map>

#include "nimbus/graph/passes.h"
#include "nimbus/ops/activation_table.h"
#include "nimbus/ops/registry.h"

namespace nimbus::graph {
namespace {

bool is_op(const Node& node, const char* name) {
  return !node.removed && node.kind == NodeKind::kOp && node.op->name == name;
}

}  // namespace

int fuse_epilogues(Graph& graph) {
  auto& nodes = graph.nodes();
  // Each value's readers (node ids; graph outputs count as a reader of -1).
  std::map<std::pair<int, int>, std::vector<int>> readers;
  for (int id = 0; id < static_cast<int>(nodes.size()); ++id) {
    if (nodes[static_cast<size_t>(id)].removed) continue;
    for (const ValueRef& input : nodes[static_cast<size_t>(id)].inputs) {
      readers[{input.node, input.output}].push_back(id);
    }
  }
  for (const ValueRef& output : graph.outputs()) readers[{output.node, output.output}].push_back(-1);
  const auto only_reader = [&](int node) {
    const std::vector<int>& list = readers[{node, 0}];
    return list.size() == 1 ? list[0] : -1;
  };

  int fused = 0;
  for (int m = 0; m < static_cast<int>(nodes.size()); ++m) {
    const bool matmul = is_op(nodes[static_cast<size_t>(m)], "matmul");
    const bool conv = is_op(nodes[static_cast<size_t>(m)], "conv2d") &&
                      nodes[static_cast<size_t>(m)].attrs.get_string("data_format") == "NHWC";
    if (!matmul && !conv) continue;
    const int add = only_reader(m);
    if (add < 0 || !is_op(nodes[static_cast<size_t>(add)], "add")) continue;
    const Node& add_node = nodes[static_cast<size_t>(add)];
    const ValueRef bias = add_node.inputs[0].node == m ? add_node.inputs[1] : add_node.inputs[0];
    const TensorSpec& product = nodes[static_cast<size_t>(m)].outputs[0];
    const TensorSpec& bias_spec = graph.spec(bias);
    if (bias.node == m || bias_spec.shape.rank() != 1 || bias_spec.dtype != product.dtype ||
        bias_spec.shape[0] != product.shape[product.shape.rank() - 1] || add_node.outputs[0].shape != product.shape) {
      continue;
    }
    int last = add;
    Activation activation = Activation::kLinear;
    const int reader = only_reader(add);
    if (reader >= 0 && !nodes[static_cast<size_t>(reader)].removed &&
        nodes[static_cast<size_t>(reader)].kind == NodeKind::kOp) {
      const Node& activation_node = nodes[static_cast<size_t>(reader)];
      if (const std::optional<Activation> candidate =
              fusable_activation_computed_by(activation_node.op->name, activation_node.attrs)) {
        activation = *candidate;
        last = reader;
      }
    }
    bool side_effect_between = false;
    for (int id = m + 1; id < last; ++id) {
      side_effect_between |=
          !nodes[static_cast<size_t>(id)].removed && nodes[static_cast<size_t>(id)].has_side_effects();
    }
    if (side_effect_between) continue;

    const Node& contraction = nodes[static_cast<size_t>(m)];
    Node& target = nodes[static_cast<size_t>(last)];
    target.op = &OpRegistry::global().get(matmul ? "fused_matmul" : "fused_conv2d");
    target.attrs = contraction.attrs;
    target.attrs.set("activation", std::string(fused_activation_name(activation)));
    target.inputs = {contraction.inputs[0], contraction.inputs[1], bias};
    nodes[static_cast<size_t>(m)].removed = true;
    if (last != add) nodes[static_cast<size_t>(add)].removed = true;
    ++fused;
  }
  return fused;
}

}  // namespace nimbus::graph
