// Attention fusion: the unfused attention that MultiHeadAttention's older
// form and user code write,
//   scores = matmul(q, k, transpose_b) [* scale] [+ mask];  p = softmax(scores, -1);  out = matmul(p, v)
// over rank-4 (batch, heads, sequence, features) tensors, becomes one
// scaled_dot_product_attention node, which never holds the (T x S) scores.
//
// It fires only where each intermediate (the scores, the scaled and masked
// scores, the probabilities) has no reader but the next op of the pattern: in
// a traced training step the gradient ops read the probabilities, so such a
// step keeps the unfused form (MultiHeadAttention calls the fused op itself,
// whose gradient is fused too). The scale must be a one-element constant (as
// constant folding leaves it) and the mask a rank-4 value that broadcasts over
// batch, heads and queries only (a key-padding mask is (B, 1, 1, S)). The fused node takes the place of the last
// matmul.
#include <map>

#include "nimbus/graph/passes.h"
#include "nimbus/ops/registry.h"

namespace nimbus::graph {
namespace {

bool is_op_named(const Node& node, const char* name) {
  return !node.removed && node.kind == NodeKind::kOp && node.op->name == name;
}

}  // namespace

int fuse_attention(Graph& graph) {
  auto& nodes = graph.nodes();
  std::map<std::pair<int, int>, int> reader_count = reader_counts(graph);
  const auto single_reader = [&](ValueRef value) { return reader_count[{value.node, value.output}] == 1; };
  const auto node_of = [&](ValueRef value) -> Node& { return nodes[static_cast<size_t>(value.node)]; };

  int fused = 0;
  for (int last = 0; last < static_cast<int>(nodes.size()); ++last) {
    Node& product = nodes[static_cast<size_t>(last)];
    if (!is_op_named(product, "matmul") || product.attrs.get_bool("transpose_a") ||
        product.attrs.get_bool("transpose_b")) {
      continue;
    }
    const ValueRef probabilities = product.inputs[0], v = product.inputs[1];
    const Node& softmax = node_of(probabilities);
    if (!is_op_named(softmax, "softmax") || !single_reader(probabilities)) continue;
    const int64_t rank = softmax.outputs[0].shape.rank();
    if (rank != 4 || (softmax.attrs.get_int("axis") != -1 && softmax.attrs.get_int("axis") != 3)) continue;
    // Walk back from the softmax: an optional mask add, an optional scale, then q kᵀ.
    ValueRef scores = softmax.inputs[0];
    std::vector<int> replaced = {probabilities.node};
    ValueRef mask{-1, 0};
    double scale = 1;
    bool matched = single_reader(scores);
    if (matched && is_op_named(node_of(scores), "add")) {
      const Node& add = node_of(scores);
      const bool first_is_scores = add.outputs[0].shape == graph.spec(add.inputs[0]).shape;
      mask = first_is_scores ? add.inputs[1] : add.inputs[0];
      replaced.push_back(scores.node);
      scores = first_is_scores ? add.inputs[0] : add.inputs[1];
      matched = single_reader(scores);
    }
    if (matched && is_op_named(node_of(scores), "mul")) {
      const Node& mul = node_of(scores);
      const int constant = node_of(mul.inputs[1]).kind == NodeKind::kConstant ? 1 : 0;
      const Node& factor = node_of(mul.inputs[static_cast<size_t>(constant)]);
      matched = factor.kind == NodeKind::kConstant && factor.value.numel() == 1 &&
                mul.outputs[0].shape == graph.spec(mul.inputs[static_cast<size_t>(1 - constant)]).shape;
      if (matched) {
        scale = factor.value.to(Device::cpu()).to(DType::kF64).item<double>();
        replaced.push_back(scores.node);
        scores = mul.inputs[static_cast<size_t>(1 - constant)];
        matched = single_reader(scores);
      }
    }
    if (!matched || !is_op_named(node_of(scores), "matmul")) continue;
    const Node& scores_product = node_of(scores);
    if (scores_product.attrs.get_bool("transpose_a") || !scores_product.attrs.get_bool("transpose_b")) continue;
    replaced.push_back(scores.node);
    const ValueRef q = scores_product.inputs[0], k = scores_product.inputs[1];
    const TensorSpec &q_spec = graph.spec(q), &k_spec = graph.spec(k), &v_spec = graph.spec(v);
    if (q_spec.shape.rank() != 4 || k_spec.shape.rank() != 4 || v_spec.shape.rank() != 4 ||
        k_spec.shape[0] != q_spec.shape[0] || k_spec.shape[1] != q_spec.shape[1] ||
        v_spec.shape[0] != q_spec.shape[0] || v_spec.shape[1] != q_spec.shape[1] || k_spec.dtype != q_spec.dtype ||
        v_spec.dtype != q_spec.dtype) {
      continue;  // batch or heads broadcast in a matmul: not attention's layout
    }
    if (mask.node >= 0) {
      const TensorSpec& mask_spec = graph.spec(mask);
      const Shape& m = mask_spec.shape;
      if (mask_spec.dtype != q_spec.dtype || m.rank() != 4 || (m[0] != 1 && m[0] != q_spec.shape[0]) ||
          (m[1] != 1 && m[1] != q_spec.shape[1]) || (m[2] != 1 && m[2] != q_spec.shape[2]) || m[3] != k_spec.shape[2]) {
        continue;
      }
    }
    bool side_effect_between = false;
    for (int id = scores.node + 1; id < last; ++id) {
      side_effect_between |=
          !nodes[static_cast<size_t>(id)].removed && nodes[static_cast<size_t>(id)].has_side_effects();
    }
    if (side_effect_between) continue;

    const TensorSpec out = product.outputs[0];
    product.op = &OpRegistry::global().get("scaled_dot_product_attention");
    product.attrs = Attrs{{"scale", scale}, {"causal", false}};
    product.inputs = {q, k, v};
    if (mask.node >= 0) product.inputs.push_back(mask);
    const Shape rows{out.shape[0], out.shape[1], out.shape[2]};
    product.outputs = {out, {rows, out.dtype == DType::kF64 ? DType::kF64 : DType::kF32}};
    for (int id : replaced) nodes[static_cast<size_t>(id)].removed = true;
    ++fused;
  }
  return fused;
}

}  // namespace nimbus::graph
