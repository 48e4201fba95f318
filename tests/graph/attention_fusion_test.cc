// Attention fusion: the unfused attention that user code and MultiHeadAttention's
// former body write (matmul, scale, mask add, softmax, matmul), traced by
// nimbus::function, becomes one scaled_dot_product_attention node after the
// passes, with the same results; a training step, whose gradient reads the
// probabilities, keeps the unfused form; the fused op's graph memory estimate
// counts the kernels' scratch, and a traced step's estimate matches the
// allocator's peak.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>

#include "nimbus/autodiff/gradient_tape.h"
#include "nimbus/device/backend.h"
#include "nimbus/graph/cost.h"
#include "nimbus/graph/function.h"
#include "nimbus/graph/memory_estimate.h"
#include "nimbus/graph/passes.h"
#include "nimbus/nimbus.h"
#include "nimbus/nn/layers.h"
#include "nimbus/ops/registry.h"
#include "support/tensor_compare.h"

namespace nimbus::graph {
namespace {

int count_ops(const Graph& graph, const std::string& name) {
  return static_cast<int>(std::count_if(graph.nodes().begin(), graph.nodes().end(), [&](const Node& node) {
    return !node.removed && node.kind == NodeKind::kOp && node.op->name == name;
  }));
}

// q, k, v (2, 3, 9, 8) and a key-padding mask (2, 9) of 1 (attend) and 0, as Keras takes it.
std::vector<Tensor> attention_arguments() {
  Generator generator(5);
  std::vector<Tensor> args;
  for (int i = 0; i < 3; ++i) args.push_back(random_normal({2, 3, 9, 8}, 0, 1, DType::kF32, Device::cpu(), &generator));
  std::vector<float> allowed(18, 1.0f);
  for (int j = 6; j < 9; ++j) allowed[static_cast<size_t>(j)] = 0.0f;  // example 0 sees 6 keys
  args.push_back(Tensor::from_vector(allowed, Shape{2, 9}));
  return args;
}

// The attention of MultiHeadAttention's unfused body: q scaled first, then
// scores + (1 - allowed) * -1e9, softmax, the probabilities times v.
Tensor keras_style_attention(const std::vector<Tensor>& in) {
  const Tensor q = in[0] * (1.0 / std::sqrt(8.0));
  Tensor scores = matmul(q, in[1], false, true);
  const Tensor allowed = reshape(in[3], Shape{2, 1, 1, 9});
  scores = scores + (1.0 - allowed) * -1e9;
  return matmul(softmax(scores, -1), in[2]);
}

TEST(AttentionFusion, FiresOnTheKerasStyleUnfusedFormWithTheSameResult) {
  const std::vector<Tensor> args = attention_arguments();
  const Tensor eager = keras_style_attention(args);
  Function traced =
      function([](const std::vector<Tensor>& in) { return std::vector<Tensor>{keras_style_attention(in)}; });
  const TracedGraph& graphs = traced.traced_for(args);
  EXPECT_EQ(count_ops(graphs.traced, "softmax"), 1);
  EXPECT_EQ(count_ops(graphs.optimized, "scaled_dot_product_attention"), 1) << graphs.optimized.to_text();
  EXPECT_EQ(count_ops(graphs.optimized, "softmax"), 0) << graphs.optimized.to_text();
  EXPECT_LE(testing::relative_error(traced(args)[0], eager), 1e-5);
}

TEST(AttentionFusion, FiresOnTheUnfusedOpsWithScaleMaskAndCausalBias) {
  const std::vector<Tensor> args = attention_arguments();
  for (bool causal : {false, true}) {
    const auto body = [causal](const std::vector<Tensor>& in) {
      const Tensor mask = reshape((in[3] - 1.0) * 1e4, Shape{2, 1, 1, 9});
      // A key-padding mask and a causal bias are two adds; the pass takes the last one as the mask.
      AttentionOptions options{
          .mask = causal ? Tensor{} : broadcast_to(mask, Shape{2, 1, 9, 9}), .causal = causal, .scale = 0.3};
      return std::vector<Tensor>{scaled_dot_product_attention_unfused(in[0], in[1], in[2], options)};
    };
    const Tensor eager = body(args)[0];
    Function traced = function(body);
    const TracedGraph& graphs = traced.traced_for(args);
    EXPECT_EQ(count_ops(graphs.optimized, "scaled_dot_product_attention"), 1) << graphs.optimized.to_text();
    EXPECT_LE(testing::relative_error(traced(args)[0], eager), 1e-5) << "causal " << causal;
  }
}

TEST(AttentionFusion, LeavesATrainingStepWhoseGradientReadsTheProbabilities) {
  const std::vector<Tensor> args = attention_arguments();
  const auto step = [](const std::vector<Tensor>& in) {
    GradientTape tape;
    tape.watch(in[0]);
    const Tensor out = keras_style_attention(in);
    return std::vector<Tensor>{out, tape.gradient(sum(out * out), {in[0]})[0]};
  };
  const std::vector<Tensor> eager = step(args);
  Function traced = function(step);
  const TracedGraph& graphs = traced.traced_for(args);
  EXPECT_EQ(count_ops(graphs.optimized, "scaled_dot_product_attention"), 0);
  const std::vector<Tensor> results = traced(args);
  EXPECT_LE(testing::relative_error(results[0], eager[0]), 1e-5);
  EXPECT_LE(testing::relative_error(results[1], eager[1]), 1e-5);
}

TEST(AttentionFusion, LeavesMatmulsThatAreNotAttention) {
  // softmax over the first axis, and a product whose probabilities are also returned.
  const std::vector<Tensor> args = attention_arguments();
  Function other_axis = function([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{matmul(softmax(matmul(in[0], in[1], false, true), 0), in[2])};
  });
  EXPECT_EQ(count_ops(other_axis.traced_for(args).optimized, "scaled_dot_product_attention"), 0);
  Function shared = function([](const std::vector<Tensor>& in) {
    const Tensor p = softmax(matmul(in[0], in[1], false, true), -1);
    return std::vector<Tensor>{matmul(p, in[2]), p};
  });
  EXPECT_EQ(count_ops(shared.traced_for(args).optimized, "scaled_dot_product_attention"), 0);
}

// MultiHeadAttention calls the fused op itself: its traced training step (causal) holds the fused op
// and its backward op, no softmax, and matches the eager step.
TEST(AttentionFusion, MultiHeadAttentionsTracedTrainingStepHoldsTheFusedOpAndNoSoftmax) {
  nn::Layer attention = nn::MultiHeadAttention(2, 4, {.use_causal_mask = true});
  Generator generator(9);
  const Tensor x = random_normal({2, 10, 8}, 0, 1, DType::kF32, Device::cpu(), &generator);
  const auto step = [&](const std::vector<Tensor>& in) {
    GradientTape tape;
    const Tensor out = attention({in[0], in[0]}, /*training=*/true)[0];
    std::vector<Tensor> results = {out};
    for (const Tensor& grad : tape.gradient(sum(out * out), attention->trainable_weights())) results.push_back(grad);
    return results;
  };
  const std::vector<Tensor> eager = step({x});
  Function traced = function(step);
  const TracedGraph& graphs = traced.traced_for({x});
  EXPECT_EQ(count_ops(graphs.optimized, "scaled_dot_product_attention"), 1) << graphs.optimized.to_text();
  EXPECT_EQ(count_ops(graphs.optimized, "scaled_dot_product_attention_backward"), 1);
  EXPECT_EQ(count_ops(graphs.optimized, "softmax"), 0);
  const std::vector<Tensor> results = traced({x});
  ASSERT_EQ(results.size(), eager.size());
  for (size_t i = 0; i < results.size(); ++i) EXPECT_LE(testing::relative_error(results[i], eager[i]), 1e-5) << i;
}

TEST(AttentionCost, CountsBothProductsPerQueryKeyPairHalvedWhenCausal) {
  for (bool causal : {false, true}) {
    Graph g;
    const TensorSpec q{Shape{2, 3, 9, 8}, DType::kF32}, v{Shape{2, 3, 10, 4}, DType::kF32};
    const int a = g.add_argument(0, q), b = g.add_argument(1, {Shape{2, 3, 10, 8}, DType::kF32}),
              c = g.add_argument(2, v);
    const int node =
        g.add_op(OpRegistry::global().get("scaled_dot_product_attention"), Attrs{{"scale", 0.5}, {"causal", causal}},
                 {{a, 0}, {b, 0}, {c, 0}}, {{Shape{2, 3, 9, 4}, DType::kF32}, {Shape{2, 3, 9}, DType::kF32}});
    const double pairs = 2 * 3 * 9 * 10 * (causal ? 0.5 : 1.0);
    EXPECT_DOUBLE_EQ(node_cost(g, node).flops, pairs * 2 * (8 + 4));
  }
}

// A traced training step of the fused op: the graph's memory estimate (the plan's arena, the outputs
// and the attention kernels' scratch, which each call takes from the allocator) against the
// allocator's peak while the first run allocates them, as tests/memory_accounting does for whole models.
TEST(AttentionMemory, EstimateOfATracedFusedStepMatchesTheAllocatorsPeak) {
  Allocator& allocator = allocator_for(Device::cpu());
  const int64_t t = 512;
  Generator generator(3);
  std::vector<Tensor> args;
  for (int i = 0; i < 3; ++i)
    args.push_back(random_normal({2, 2, t, 64}, 0, 1, DType::kF32, Device::cpu(), &generator));
  Function step = function([](const std::vector<Tensor>& in) {
    GradientTape tape;
    for (const Tensor& x : in) tape.watch(x);
    const Tensor out = scaled_dot_product_attention(in[0], in[1], in[2], {.causal = true});
    return tape.gradient(sum(out), in);
  });
  const TracedGraph& graphs = step.traced_for(args);
  const MemoryEstimate estimate = estimate_memory(graphs.optimized, graphs.plan, {});
  const uint64_t before = allocator.stats().bytes_in_use;
  allocator.reset_peak();
  (void)step(args);
  const double measured = static_cast<double>(allocator.stats().peak_bytes_in_use - before);
  const double predicted = static_cast<double>(estimate.total() - estimate.input_bytes);  // inputs exist already
  std::cout << "attention step at T = " << t << ": predicted " << predicted << " bytes (" << estimate.to_string()
            << "), measured " << measured << "\n";
  EXPECT_GT(estimate.workspace_bytes, 0u) << estimate.to_string();
  EXPECT_NEAR(predicted / measured, 1.0, 0.10) << estimate.to_string() << " vs measured " << measured << " bytes";
}

}  // namespace
}  // namespace nimbus::graph
