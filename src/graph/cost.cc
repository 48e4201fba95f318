#include "nimbus/graph/cost.h"

#include <fmt/format.h>

#include <algorithm>

#include "nimbus/base/size_units.h"
#include "nimbus/ops/activation_table.h"
#include "nimbus/ops/fused_elementwise.h"
#include "nimbus/ops/op_profile.h"

namespace nimbus::graph {

namespace {

uint64_t bytes_of(const TensorSpec& spec) { return static_cast<uint64_t>(spec.shape.numel()) * dtype_size(spec.dtype); }

// 2 x (output elements) x (filter taps per output element): a filter
// [kh, kw, in / groups, out] contributes kh kw in / groups multiply-adds.
double convolution_flops(const Shape& output_or_grad, const Shape& filter) {
  const int64_t taps = filter.numel() / filter[filter.rank() - 1];
  return 2.0 * static_cast<double>(output_or_grad.numel()) * static_cast<double>(taps);
}

double op_flops(const Graph& graph, const Node& node) {
  const std::string& name = node.op->name;
  const auto input = [&](int i) -> const Shape& { return graph.spec(node.inputs[static_cast<size_t>(i)]).shape; };
  if (node.outputs.empty()) {
    // An op that writes its inputs instead (assign, adam_update): one operation per element it writes.
    int64_t written = 0;
    for (size_t k = 0; k < node.op->written_inputs(node.attrs); ++k) written += input(static_cast<int>(k)).numel();
    return static_cast<double>(written);
  }
  const Shape& output = node.outputs[0].shape;
  if (name == "matmul" || name == "fused_matmul") {
    const Shape& a = input(0);
    const bool transposed = node.attrs.has("transpose_a") && node.attrs.get_bool("transpose_a");
    const int64_t k = a[transposed ? a.rank() - 2 : a.rank() - 1];
    // fused_matmul adds one operation per element for the bias and one for an activation.
    const int64_t epilogue = name == "matmul" ? 0 : (fused_activation_of(node.attrs) == Activation::kLinear ? 1 : 2);
    return static_cast<double>(output.numel()) * static_cast<double>(2 * k + epilogue);
  }
  if (name == "matmul_pair") {
    // 2 m n k for each product, k from its first operand.
    double flops = 0;
    for (int product = 0; product < 2; ++product) {
      const Shape& a = input(2 * product);
      const int64_t k = a[node.attrs.get_bool(product == 0 ? "transpose_a0" : "transpose_a1") ? 0 : 1];
      flops += 2.0 * static_cast<double>(node.outputs[static_cast<size_t>(product)].shape.numel() * k);
    }
    return flops;
  }
  if (name == "conv2d") return convolution_flops(output, input(1));
  if (name == "fused_conv2d") {
    // The convolution plus its bias and, when there is one, its activation per output element.
    const int64_t epilogue = fused_activation_of(node.attrs) == Activation::kLinear ? 1 : 2;
    return convolution_flops(output, input(1)) + static_cast<double>(output.numel() * epilogue);
  }
  if (name == "conv2d_backward_input") return convolution_flops(input(0), input(1));
  if (name == "conv2d_backward_filter") return convolution_flops(input(0), output);
  if (name == "scaled_dot_product_attention" || name == "scaled_dot_product_attention_backward") {
    // q kᵀ and p v per (query, key) pair, halved when causal; backward recomputes q kᵀ and adds
    // grad_out vᵀ, pᵀ grad_out, dsᵀ q and ds k.
    const bool forward = name == "scaled_dot_product_attention";
    const Shape &q = input(forward ? 0 : 1), &v = input(forward ? 2 : 3);
    const double pairs = static_cast<double>(q[0] * q[1] * q[2] * v[2]) * (node.attrs.get_bool("causal") ? 0.5 : 1);
    const double d = static_cast<double>(q[3]), dv = static_cast<double>(v[3]);
    return forward ? pairs * 2 * (d + dv) : pairs * 2 * (3 * d + 2 * dv);
  }
  int64_t elements = 0;
  for (const ValueRef& in : node.inputs) elements = std::max(elements, graph.spec(in).shape.numel());
  for (const TensorSpec& out : node.outputs) elements = std::max(elements, out.shape.numel());
  if (node.op == &fused_elementwise_op()) {
    const auto& program = static_cast<const ExpressionProgram&>(*node.attrs.get_object("program"));
    return static_cast<double>(elements) * static_cast<double>(program.instructions.size());
  }
  return static_cast<double>(elements);
}

}  // namespace

NodeCost node_cost(const Graph& graph, int id) {
  const Node& node = graph.node(id);
  if (node.kind != NodeKind::kOp || node.op->output_aliases_input) return {};
  NodeCost cost{.flops = op_flops(graph, node), .op = node.op->name, .key = op_cost_key(*node.op, node.attrs)};
  for (const ValueRef& in : node.inputs) cost.bytes_read += bytes_of(graph.spec(in));
  for (const TensorSpec& out : node.outputs) cost.bytes_written += bytes_of(out);
  for (size_t k = 0; k < node.op->written_inputs(node.attrs); ++k) {
    cost.bytes_written += bytes_of(graph.spec(node.inputs[k]));
  }
  return cost;
}

GraphCost graph_cost(const Graph& graph, const MemoryPlan& plan) {
  GraphCost total;
  total.arena_bytes = plan.arena_bytes;
  // Trainable variables the graph updates (an assign's target, or an output written into one).
  std::vector<bool> updated(graph.nodes().size(), false);
  for (const Node& node : graph.nodes()) {
    if (node.removed || node.kind != NodeKind::kOp) continue;
    for (size_t k = 0; k < node.op->written_inputs(node.attrs); ++k) {
      updated[static_cast<size_t>(node.inputs[k].node)] = true;
    }
    for (int target : node.writes_into) {
      if (target >= 0) updated[static_cast<size_t>(target)] = true;
    }
  }
  for (int id = 0; id < static_cast<int>(graph.nodes().size()); ++id) {
    const Node& node = graph.node(id);
    total.nodes.push_back(node.removed ? NodeCost{} : node_cost(graph, id));
    if (node.removed) continue;
    switch (node.kind) {
      case NodeKind::kArgument: total.input_bytes += bytes_of(node.outputs[0]); break;
      case NodeKind::kCapture:
        if (node.trainable) {
          total.parameter_bytes += bytes_of(node.outputs[0]);
          if (updated[static_cast<size_t>(id)]) total.gradient_bytes += bytes_of(node.outputs[0]);
        } else if (!node.name.empty()) {
          total.state_bytes += bytes_of(node.outputs[0]);
        }
        break;
      case NodeKind::kConstant: break;
      case NodeKind::kOp: {
        const NodeCost& cost = total.nodes.back();
        if (node.op->output_aliases_input) break;
        ++total.kernels;
        total.flops += cost.flops;
        total.bytes_read += cost.bytes_read;
        total.bytes_written += cost.bytes_written;
        for (const ValueRef& in : node.inputs) total.bytes_by_dtype[graph.spec(in).dtype] += bytes_of(graph.spec(in));
        for (const TensorSpec& out : node.outputs) total.bytes_by_dtype[out.dtype] += bytes_of(out);
        break;
      }
    }
  }
  for (const ValueRef& out : graph.outputs()) total.output_bytes += bytes_of(graph.spec(out));
  return total;
}

std::string GraphCost::to_string() const {
  return fmt::format(
      "{:.3g} GFLOP in {} kernels, {} read, {} written; arena {}, parameters {}, gradients {}, other state {}",
      flops / 1e9, kernels, format_bytes(bytes_read), format_bytes(bytes_written), format_bytes(arena_bytes),
      format_bytes(parameter_bytes), format_bytes(gradient_bytes), format_bytes(state_bytes));
}

}  // namespace nimbus::graph
