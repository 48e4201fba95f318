// Algebraic simplification: identities that remove work without changing a
// single bit of the result.
//   x * 1, 1 * x, x / 1, x + 0, 0 + x, x - 0  -> x   (when the result has x's shape and dtype)
//   transpose(transpose(x, p), q)               -> transpose(x, p∘q), or x when that is the identity
//   reshape(reshape(x))                         -> reshape(x)
#include <numeric>

#include "nimbus/graph/passes.h"

namespace nimbus::graph {
namespace {

// True when the value is a constant whose every element equals `scalar`.
bool is_constant(const Graph& graph, ValueRef value, double scalar) {
  const Node& node = graph.node(value.node);
  if (node.kind != NodeKind::kConstant || !node.value.device().is_cpu()) return false;
  for (double v : node.value.to_vector<double>()) {
    if (v != scalar) return false;
  }
  return true;
}

// Which input (0 or 1) can stand for the result, or -1.
int identity_operand(const Graph& graph, const Node& node) {
  const std::string& op = node.op->name;
  const TensorSpec& out = node.outputs[0];
  auto same_as_output = [&](int i) {
    const TensorSpec& spec = graph.spec(node.inputs[static_cast<size_t>(i)]);
    return spec.shape == out.shape && spec.dtype == out.dtype;
  };
  const ValueRef a = node.inputs[0];
  if (op == "mul" || op == "add") {
    const double neutral = op == "mul" ? 1.0 : 0.0;
    if (is_constant(graph, node.inputs[1], neutral) && same_as_output(0)) return 0;
    if (is_constant(graph, a, neutral) && same_as_output(1)) return 1;
  } else if (op == "div" || op == "sub") {
    if (is_constant(graph, node.inputs[1], op == "div" ? 1.0 : 0.0) && same_as_output(0)) return 0;
  }
  return -1;
}

}  // namespace

int simplify_algebra(Graph& graph) {
  int simplified = 0;
  auto& nodes = graph.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& node = nodes[i];
    if (node.removed || node.kind != NodeKind::kOp) continue;
    const std::string& op = node.op->name;
    const ValueRef self{static_cast<int>(i), 0};
    if (op == "mul" || op == "add" || op == "div" || op == "sub") {
      const int operand = identity_operand(graph, node);
      if (operand >= 0) {
        graph.replace_uses(self, node.inputs[static_cast<size_t>(operand)]);
        node.removed = true;
        ++simplified;
      }
    } else if (op == "transpose" && graph.node(node.inputs[0].node).kind == NodeKind::kOp &&
               graph.node(node.inputs[0].node).op == node.op) {
      const Node& inner = graph.node(node.inputs[0].node);
      const std::vector<int64_t>& p = inner.attrs.get_ints("perm");
      const std::vector<int64_t>& q = node.attrs.get_ints("perm");
      // Output axis j of the pair is input axis p[q[j]].
      std::vector<int64_t> combined(q.size());
      for (size_t j = 0; j < q.size(); ++j) combined[j] = p[static_cast<size_t>(q[j])];
      std::vector<int64_t> identity(q.size());
      std::iota(identity.begin(), identity.end(), 0);
      if (combined == identity) {
        graph.replace_uses(self, inner.inputs[0]);
        node.removed = true;
      } else {
        node.inputs[0] = inner.inputs[0];
        node.attrs.set("perm", combined);
      }
      ++simplified;
    } else if (op == "reshape" && graph.node(node.inputs[0].node).kind == NodeKind::kOp &&
               graph.node(node.inputs[0].node).op == node.op) {
      node.inputs[0] = graph.node(node.inputs[0].node).inputs[0];
      if (graph.spec(node.inputs[0]).shape == node.outputs[0].shape) {
        graph.replace_uses(self, node.inputs[0]);
        node.removed = true;
      }
      ++simplified;
    }
  }
  return simplified;
}

}  // namespace nimbus::graph
