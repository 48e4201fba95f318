// Matmul pairing (part of the JIT switch, CPU graphs): a dense layer's backward pass computes two products
// from one gradient g, the input's gradient matmul(g, w, transpose_b) and the weight's matmul(x, g,
// transpose_a), one right after the other and neither reading the other. Two such adjacent 2-D f32 matmuls
// that share an input, with outputs of up to 2^17 elements each, become one matmul_pair node in the second's place,
// whose CPU kernel runs them side by side on a two-thread pool (src/kernels/cpu/onednn_matmul.cc decides when that
// pays). Adjacent: no op node lies between them, so the pair computes both at a point where both could run and before
// any reader of either.
#include <algorithm>

#include "nimbus/graph/passes.h"
#include "nimbus/ops/registry.h"

namespace nimbus::graph {
namespace {

// Products with more output elements than this (512 KiB of f32) stay apart. Side by side, each output lies
// whole in the cache of the core that wrote it, and a next kernel that splits it over both threads pulls half
// of it across: the CNN example's dense layer (outputs of 128 x 3136) saved about 0.1 ms per step and lost
// 0.6 ms in the pooling gradient that reads its input gradient; even as a pair run one after the other, that
// pooling gradient took 0.4 ms more per step than after two matmul nodes.
constexpr int64_t kPairedOutputElements = int64_t{1} << 17;

bool is_pairable_matmul(const Graph& graph, const Node& node) {
  if (node.removed || node.kind != NodeKind::kOp || node.op->name != "matmul") return false;
  if (node.outputs[0].shape.numel() > kPairedOutputElements) return false;
  for (const ValueRef& input : node.inputs) {
    const TensorSpec& spec = graph.spec(input);
    if (spec.dtype != DType::kF32 || spec.shape.rank() != 2) return false;
  }
  return true;
}

bool same_value(ValueRef a, ValueRef b) { return a.node == b.node && a.output == b.output; }

bool share_an_input(const Node& first, const Node& second) {
  for (const ValueRef& a : first.inputs) {
    for (const ValueRef& b : second.inputs) {
      if (same_value(a, b)) return true;
    }
  }
  return false;
}

}  // namespace

int pair_matmuls(Graph& graph) {
  auto& nodes = graph.nodes();
  int paired = 0;
  for (int first = 0; first < static_cast<int>(nodes.size()); ++first) {
    if (!is_pairable_matmul(graph, nodes[static_cast<size_t>(first)])) continue;
    int second = first + 1;  // the next op node
    while (second < static_cast<int>(nodes.size()) &&
           (nodes[static_cast<size_t>(second)].removed || nodes[static_cast<size_t>(second)].kind != NodeKind::kOp)) {
      ++second;
    }
    if (second == static_cast<int>(nodes.size()) || !is_pairable_matmul(graph, nodes[static_cast<size_t>(second)])) {
      continue;
    }
    const Node& a = nodes[static_cast<size_t>(first)];
    Node& b = nodes[static_cast<size_t>(second)];
    const bool reads_first = std::ranges::any_of(b.inputs, [&](ValueRef input) { return input.node == first; });
    if (reads_first || !share_an_input(a, b)) continue;

    Node pair = b;
    pair.op = &OpRegistry::global().get("matmul_pair");
    pair.attrs = Attrs{{"transpose_a0", a.attrs.get_bool("transpose_a")},
                       {"transpose_b0", a.attrs.get_bool("transpose_b")},
                       {"transpose_a1", b.attrs.get_bool("transpose_a")},
                       {"transpose_b1", b.attrs.get_bool("transpose_b")}};
    pair.inputs = {a.inputs[0], a.inputs[1], b.inputs[0], b.inputs[1]};
    pair.outputs = {a.outputs[0], b.outputs[0]};
    nodes[static_cast<size_t>(second)] = std::move(pair);
    nodes[static_cast<size_t>(first)].removed = true;
    // Readers of the second product now take output 1, then readers of the first output 0.
    graph.replace_uses({second, 0}, {second, 1});
    graph.replace_uses({first, 0}, {second, 0});
    ++paired;
    first = second;  // each matmul joins one pair at most
  }
  return paired;
}

}  // namespace nimbus::graph
