// Pool-ReLU gradient fusion (part of the JIT switch, CPU graphs): in a CNN's
// backward pass max pooling's gradient is followed by the gradient of the
// ReLU before it,
//   p = max_pool2d_backward(g, x);  r = where(greater(x, 0), p, 0)
// which becomes one max_pool2d_relu_backward(g, x) node: one pass over the
// largest activations of the step instead of two (x and p are read again and r
// written again otherwise). The result is the same to the bit: where keeps
// p exactly where x > 0 and writes 0 elsewhere, as the fused kernel does.
//
// p and the comparison must have no other reader; the fused node takes the
// where's place, and nothing with side effects may run between the pooling
// gradient and it (x could be a variable an update changes).
#include <map>

#include "nimbus/graph/passes.h"
#include "nimbus/ops/registry.h"

namespace nimbus::graph {
namespace {

bool is_op(const Node& node, const char* name) {
  return !node.removed && node.kind == NodeKind::kOp && node.op->name == name;
}

// A constant whose every element is 0 (relu's gradient compares with and selects a scalar zero), or a fill with 0.
bool is_zero(const Graph& graph, ValueRef value) {
  const Node& node = graph.node(value.node);
  if (is_op(node, "fill")) return node.attrs.get_float("value") == 0.0;
  if (node.kind != NodeKind::kConstant || !node.value.device().is_cpu()) return false;
  for (double v : node.value.to_vector<double>()) {
    if (v != 0.0) return false;
  }
  return true;
}

}  // namespace

int fuse_pool_relu_gradients(Graph& graph) {
  auto& nodes = graph.nodes();
  std::map<std::pair<int, int>, int> readers = reader_counts(graph);
  const auto read_once = [&](ValueRef value) { return readers[{value.node, value.output}] == 1; };

  int fused = 0;
  for (int w = 0; w < static_cast<int>(nodes.size()); ++w) {
    Node& where = nodes[static_cast<size_t>(w)];
    if (!is_op(where, "where") || !is_zero(graph, where.inputs[2])) continue;
    const ValueRef condition = where.inputs[0], pooled = where.inputs[1];
    const Node& greater = graph.node(condition.node);
    const Node& pool = graph.node(pooled.node);
    if (!is_op(greater, "greater") || !is_op(pool, "max_pool2d_backward") || !read_once(condition) ||
        !read_once(pooled) || !is_zero(graph, greater.inputs[1])) {
      continue;
    }
    const ValueRef x = pool.inputs[1];
    if (greater.inputs[0].node != x.node || greater.inputs[0].output != x.output ||
        where.outputs[0].shape != pool.outputs[0].shape || where.outputs[0].dtype != pool.outputs[0].dtype) {
      continue;
    }
    bool side_effect_between = false;
    for (int id = pooled.node + 1; id < w; ++id) {
      side_effect_between |=
          !nodes[static_cast<size_t>(id)].removed && nodes[static_cast<size_t>(id)].has_side_effects();
    }
    if (side_effect_between) continue;

    where.op = &OpRegistry::global().get("max_pool2d_relu_backward");
    where.attrs = pool.attrs;
    where.inputs = pool.inputs;
    nodes[static_cast<size_t>(pooled.node)].removed = true;
    nodes[static_cast<size_t>(condition.node)].removed = true;
    ++fused;
  }
  return fused;
}

}  // namespace nimbus::graph
