// Issue 10's transformer block (tests/support/policy_step_models.h), small
// enough for the CPU: under mixed_bfloat16 its traced train step keeps the
// variables f32, runs every matmul (projections, attention scores and
// weighted values, the feed-forward layers; forward and backward) on bf16
// inputs and the softmax and layer norms in f32, as the per-op table says;
// and its loss and gradients stay within 1e-2 of the float32 block's from the
// same weights. bench_gpu times the full-size block on an H200.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "nimbus/graph/function.h"
#include "nimbus/nimbus.h"
#include "tests/support/policy_step_models.h"
#include "tests/support/tensor_compare.h"

namespace nimbus {
namespace {

const testing::TransformerBlockSize kSmall{.d_model = 64, .heads = 4, .sequence = 16, .feed_forward = 256};
constexpr int64_t kBatch = 2;

std::vector<Tensor> step_inputs() {
  Generator gen(5);
  const Shape shape{kBatch, kSmall.sequence, kSmall.d_model};
  return {random_normal(shape, 0, 1, DType::kF32, Device::cpu(), &gen),
          random_normal(shape, 0, 1, DType::kF32, Device::cpu(), &gen), testing::Adam::step_size(1)};
}

std::string dtypes_of_inputs(const graph::Graph& g, const graph::Node& node) {
  std::string text;
  for (const graph::ValueRef& input : node.inputs) text += std::string(dtype_name(g.spec(input).dtype)) + " ";
  return text;
}

TEST(MixedTransformerBlock, TracedStepHasF32VariablesBf16MatmulsAndAttentionAndF32LayerNorm) {
  std::unique_ptr<testing::Model> model = testing::make_transformer_block(kSmall, "mixed_bfloat16");
  testing::Model* m = model.get();
  const Function step = function([m](const std::vector<Tensor>& in) { return m->step(in); },
                                 {.name = "train_step", .graph = true, .jit = true});
  const TracedGraph& traced = step.traced_for(step_inputs());
  const graph::Graph& g = traced.traced;

  int variables = 0, matmuls = 0, attentions = 0, layer_norms = 0, gelus = 0;
  for (const graph::Node& node : g.nodes()) {
    if (node.kind == graph::NodeKind::kCapture && node.trainable) {
      ++variables;
      EXPECT_EQ(node.outputs[0].dtype, DType::kF32) << "variable " << node.name;
    }
    if (node.kind != graph::NodeKind::kOp) continue;
    const std::string& op = node.op->name;
    const DType out = node.outputs.empty() ? DType::kF32 : node.outputs[0].dtype;  // assign has none
    if (op == "matmul") {
      ++matmuls;
      for (const graph::ValueRef& input : node.inputs) {
        EXPECT_EQ(g.spec(input).dtype, DType::kBF16) << "matmul inputs: " << dtypes_of_inputs(g, node);
      }
      EXPECT_EQ(out, DType::kBF16);
    }
    if (op.rfind("layer_norm", 0) == 0) {
      ++layer_norms;
      for (const graph::ValueRef& input : node.inputs) {
        EXPECT_EQ(g.spec(input).dtype, DType::kF32) << op << " inputs: " << dtypes_of_inputs(g, node);
      }
      EXPECT_EQ(out, DType::kF32) << op;
    }
    if (op.rfind("scaled_dot_product_attention", 0) == 0) {
      // The fused attention reads the bf16 projections and keeps its softmax (the logsumexp) in f32.
      ++attentions;
      const size_t q = op == "scaled_dot_product_attention" ? 0 : 1;  // the backward's inputs start with grad_out
      for (size_t i = q; i < q + 3; ++i) {
        EXPECT_EQ(g.spec(node.inputs[i]).dtype, DType::kBF16) << op << ": " << dtypes_of_inputs(g, node);
      }
      if (op == "scaled_dot_product_attention") EXPECT_EQ(node.outputs[1].dtype, DType::kF32) << "the logsumexp";
    }
    if (op == "gelu") {
      ++gelus;
      EXPECT_EQ(out, DType::kBF16) << "gelu follows its bf16 input";
    }
    if (op == "assign") {
      EXPECT_EQ(g.spec(node.inputs[1]).dtype, DType::kF32) << "updates of the f32 variables";
    }
  }
  // Attention: 4 kernels and 4 biases; two layer norms' gamma and beta; two dense kernels and biases.
  EXPECT_EQ(variables, 16);
  // Forward: q, k, v, output projection and the two dense layers; backward: both operands' gradients of
  // each (every operand depends on a variable). Scores and weighted values are inside the fused attention.
  EXPECT_EQ(matmuls, 6 + 2 * 6);
  EXPECT_EQ(attentions, 2);   // forward and backward
  EXPECT_EQ(layer_norms, 4);  // two forward, two backward
  EXPECT_EQ(gelus, 1);
  EXPECT_EQ(g.spec(g.outputs()[0]).dtype, DType::kF32) << "the loss";

  // After fusion (the graph that runs): every matmul, plain or with its bias fused, still reads bf16.
  int optimized_matmuls = 0;
  for (const graph::Node& node : traced.optimized.nodes()) {
    if (node.removed || node.kind != graph::NodeKind::kOp) continue;
    if (node.op->name != "matmul" && node.op->name != "fused_matmul") continue;
    ++optimized_matmuls;
    EXPECT_EQ(traced.optimized.spec(node.inputs[0]).dtype, DType::kBF16) << node.op->name;
    EXPECT_EQ(traced.optimized.spec(node.inputs[1]).dtype, DType::kBF16) << node.op->name;
  }
  EXPECT_EQ(optimized_matmuls, matmuls);
}

double norm(const Tensor& x) { return std::sqrt(sum(square(x.to(DType::kF64))).item<double>()); }

struct LossAndGradients {
  std::vector<Tensor> values;      // the loss, then one gradient per parameter
  std::vector<std::string> names;  // "the loss", then the parameters' names
};

// The loss and every gradient of one traced step (graph mode, fusion on), without the update.
LossAndGradients loss_and_gradients(const char* policy) {
  std::unique_ptr<testing::Model> model = testing::make_transformer_block(kSmall, policy);
  testing::Model* m = model.get();
  const Function gradients = function(
      [m](const std::vector<Tensor>& in) {
        GradientTape tape;
        std::vector<Tensor> out = {m->loss(in[0], in[1])};
        for (const Tensor& grad : tape.gradient(out[0], m->params)) out.push_back(grad);
        return out;
      },
      {.name = "gradients", .graph = true, .jit = true});
  const std::vector<Tensor> in = step_inputs();
  LossAndGradients result{gradients({in[0], in[1]}), {"the loss"}};
  for (const Variable& param : m->params) result.names.push_back(param.name());
  return result;
}

TEST(MixedTransformerBlock, LossAndGradientsAreWithinOnePercentOfFloat32) {
  const LossAndGradients f32 = loss_and_gradients("float32");
  const LossAndGradients bf16 = loss_and_gradients("mixed_bfloat16");
  ASSERT_EQ(f32.values.size(), 17u);  // the loss and 16 gradients
  ASSERT_EQ(bf16.values.size(), f32.values.size());
  EXPECT_GT(f32.values[0].item<float>(), 0.1f) << "a loss far from its target";
  double query_bias_gradient = 0;
  for (size_t i = 0; i < f32.values.size(); ++i) {
    const std::string& what = f32.names[i];
    if (what.ends_with("query/bias")) query_bias_gradient = norm(f32.values[i]);
  }
  for (size_t i = 0; i < f32.values.size(); ++i) {
    const std::string& what = f32.names[i];
    EXPECT_EQ(bf16.values[i].dtype(), DType::kF32) << what << " (of an f32 variable)";
    if (what.ends_with("key/bias")) {
      // Adding a key bias b shifts every score of query row t by q_t . b, which softmax ignores: its
      // gradient is zero but for rounding, so a relative error says nothing. Both stay at rounding level.
      EXPECT_LT(norm(f32.values[i]), 1e-4 * query_bias_gradient) << what;
      EXPECT_LT(norm(bf16.values[i]), 1e-2 * query_bias_gradient) << what;
      continue;
    }
    EXPECT_GT(norm(f32.values[i]), 0) << what << " is all zeros";
    const double error = testing::relative_error(bf16.values[i], f32.values[i]);
    EXPECT_LE(error, 1e-2) << what;
    EXPECT_GT(error, 0) << what << ": bit-identical to float32, so the bf16 path did not run";
  }
  EXPECT_GT(query_bias_gradient, 0);
}

}  // namespace
}  // namespace nimbus
