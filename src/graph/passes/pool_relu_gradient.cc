// ReLU gradient fusions (part of the JIT switch, CPU graphs). relu's gradient traces as
//   r = where(greater(x, 0), p, 0)
// from relu's output x, and the layer below sums r into its bias gradient. Two cases become one pass:
//
// Pool-ReLU: in a CNN's backward pass, p = max_pool2d_backward(g, x) of the max pooling after the relu. The
// where becomes one max_pool2d_relu_backward(g, x) node: one pass over the largest activations of the step
// instead of two (x and p are read again and r written again otherwise). The result is the same to the bit:
// where keeps p exactly where x > 0 and writes 0 elsewhere, as the fused kernel does. p and the comparison
// must have no other reader; the fused node takes the where's place, and nothing with side effects may run
// between the pooling gradient and it (x could be a variable an update changes). The fused op also sums r
// per channel, which is the bias gradient of the convolution that computed x: a sum(r) over all but the
// channel axis (as (C), or kept dims that a reshape to (C), its only reader, drops) then reads that output
// instead of r again.
//
// ReLU-bias: any other f32 p of x's shape, when r is summed over all but its last axis (a dense layer's bias
// gradient, the same sum as above): the where and that sum become one relu_bias_backward(p, x) node, one
// pass over p and x and one fork of the pool instead of two of each. Both outputs are the unfused ones to the
// bit (the CPU kernel adds in sum's order). The comparison must have no other reader, and nothing with side
// effects may run between it and the where.
#include <map>
#include <string>
#include <vector>

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

// The node whose value is r summed per channel as (C), for r = (node r_node, output 0) with its channels on
// `channel_axis`: a sum over all other axes (to (C), or keeping them when its only reader is a reshape to (C)).
// -1 when none.
int channel_sum_of(const Graph& graph, int r_node, int64_t channel_axis, std::map<std::pair<int, int>, int>& readers) {
  const TensorSpec& r = graph.node(r_node).outputs[0];
  const Shape channels{r.shape[channel_axis]};
  std::vector<int64_t> other_axes;
  for (int64_t axis = 0; axis < r.shape.rank(); ++axis) {
    if (axis != channel_axis) other_axes.push_back(axis);
  }
  const auto reads = [&](const Node& node, int producer) {
    return !node.inputs.empty() && node.inputs[0].node == producer && node.inputs[0].output == 0;
  };
  for (int id = r_node + 1; id < static_cast<int>(graph.nodes().size()); ++id) {
    const Node& sum = graph.node(id);
    if (!is_op(sum, "sum") || !reads(sum, r_node) || sum.attrs.get_ints("axes") != other_axes ||
        sum.outputs[0].dtype != r.dtype) {
      continue;
    }
    if (sum.outputs[0].shape == channels) return id;
    if (readers[{id, 0}] != 1) return -1;
    for (int reader = id + 1; reader < static_cast<int>(graph.nodes().size()); ++reader) {
      const Node& node = graph.node(reader);
      if (!node.removed && reads(node, id))
        return is_op(node, "reshape") && node.outputs[0].shape == channels ? reader : -1;
    }
    return -1;
  }
  return -1;
}

// Whether a node with side effects lies strictly between nodes `first` and `last`.
bool side_effect_lies_between(const Graph& graph, int first, int last) {
  for (int id = first + 1; id < last; ++id) {
    if (!graph.node(id).removed && graph.node(id).has_side_effects()) return true;
  }
  return false;
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
    if (side_effect_lies_between(graph, pooled.node, w)) continue;

    where.op = &OpRegistry::global().get("max_pool2d_relu_backward");
    where.attrs = pool.attrs;
    where.inputs = pool.inputs;
    const std::string data_format = pool.attrs.get_string("data_format");
    const TensorSpec r = where.outputs[0];
    where.outputs.push_back({Shape{r.shape[data_format == "NHWC" ? 3 : 1]}, r.dtype});
    nodes[static_cast<size_t>(pooled.node)].removed = true;
    nodes[static_cast<size_t>(condition.node)].removed = true;
    const int channel_sum = channel_sum_of(graph, w, data_format == "NHWC" ? 3 : 1, readers);
    if (channel_sum >= 0) {
      graph.replace_uses({channel_sum, 0}, {w, 1});
      nodes[static_cast<size_t>(channel_sum)].removed = true;  // a sum, or a reshape of one that is dead now
    }
    ++fused;
  }
  return fused;
}

int fuse_relu_bias_gradients(Graph& graph) {
  auto& nodes = graph.nodes();
  std::map<std::pair<int, int>, int> readers = reader_counts(graph);
  int fused = 0;
  for (int w = 0; w < static_cast<int>(nodes.size()); ++w) {
    Node& where = nodes[static_cast<size_t>(w)];
    if (!is_op(where, "where") || !is_zero(graph, where.inputs[2])) continue;
    const ValueRef condition = where.inputs[0], gradient = where.inputs[1];
    const Node& greater = graph.node(condition.node);
    if (!is_op(greater, "greater") || readers[{condition.node, condition.output}] != 1 ||
        !is_zero(graph, greater.inputs[1])) {
      continue;
    }
    const ValueRef x = greater.inputs[0];
    const TensorSpec r = where.outputs[0];
    const auto same_as_r = [&](ValueRef value) {
      return graph.spec(value).shape == r.shape && graph.spec(value).dtype == r.dtype;
    };
    // Rank 2 or more: a rank-1 r has no leading axes to sum over.
    if (r.dtype != DType::kF32 || r.shape.rank() < 2 || !same_as_r(x) || !same_as_r(gradient) ||
        side_effect_lies_between(graph, condition.node, w)) {
      continue;
    }
    const int bias_sum = channel_sum_of(graph, w, r.shape.rank() - 1, readers);
    if (bias_sum < 0) continue;

    where.op = &OpRegistry::global().get("relu_bias_backward");
    where.attrs = {};
    where.inputs = {gradient, x};
    where.outputs.push_back({Shape{r.shape[r.shape.rank() - 1]}, r.dtype});
    nodes[static_cast<size_t>(condition.node)].removed = true;
    graph.replace_uses({bias_sum, 0}, {w, 1});
    nodes[static_cast<size_t>(bias_sum)].removed = true;  // a sum, or a reshape of one that is dead now
    ++fused;
  }
  return fused;
}

}  // namespace nimbus::graph
