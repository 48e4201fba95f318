// Graph cost: FLOPs and bytes per node by hand-computed formulas, and the
// parameter, gradient and state bytes of a traced training step.
#include "nimbus/graph/cost.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nimbus/graph/function.h"
#include "nimbus/nimbus.h"
#include "nimbus/ops/registry.h"
#include "support/step_models.h"

namespace nimbus::graph {
namespace {

const OpSchema& op(const char* name) { return OpRegistry::global().get(name); }
TensorSpec f32(std::initializer_list<int64_t> dims) { return {Shape(dims), DType::kF32}; }

TEST(GraphCost, CountsMatmulConvolutionElementwiseAndViewsByTheirFormulas) {
  Graph g;
  const int x = g.add_argument(0, f32({32, 784}));
  const int w = g.add_capture(ones({784, 256}), "w", true);
  const int wt = g.add_capture(ones({10, 256}), "wt", true);
  const int product =
      g.add_op(op("matmul"), Attrs{{"transpose_a", false}, {"transpose_b", false}}, {{x, 0}, {w, 0}}, {f32({32, 256})});
  const int activated = g.add_op(op("relu"), {}, {{product, 0}}, {f32({32, 256})});
  const int logits = g.add_op(op("matmul"), Attrs{{"transpose_a", false}, {"transpose_b", true}},
                              {{activated, 0}, {wt, 0}}, {f32({32, 10})});
  const int flat = g.add_op(op("reshape"), Attrs{{"shape", Shape{320}}}, {{logits, 0}}, {f32({320})});
  const int image = g.add_argument(1, f32({8, 28, 28, 3}));
  const int filter = g.add_capture(ones({5, 5, 3, 16}), "filter", true);
  const int conv = g.add_op(op("conv2d"),
                            Attrs{{"strides", std::vector<int64_t>{1, 1}},
                                  {"padding", std::string("valid")},
                                  {"dilations", std::vector<int64_t>{1, 1}},
                                  {"groups", int64_t{1}},
                                  {"data_format", std::string("NHWC")}},
                            {{image, 0}, {filter, 0}}, {f32({8, 24, 24, 16})});
  const int bias = g.add_capture(ones({16}), "bias", true);
  const int fused = g.add_op(op("fused_conv2d"),
                             Attrs{{"strides", std::vector<int64_t>{1, 1}},
                                   {"padding", std::string("valid")},
                                   {"dilations", std::vector<int64_t>{1, 1}},
                                   {"groups", int64_t{1}},
                                   {"data_format", std::string("NHWC")},
                                   {"activation", std::string("relu")}},
                             {{image, 0}, {filter, 0}, {bias, 0}}, {f32({8, 24, 24, 16})});
  g.outputs() = {{flat, 0}, {conv, 0}, {fused, 0}};

  EXPECT_EQ(node_cost(g, product).flops, 2.0 * 32 * 256 * 784);
  EXPECT_EQ(node_cost(g, product).bytes_read, (32 * 784 + 784 * 256) * 4u);
  EXPECT_EQ(node_cost(g, product).bytes_written, 32 * 256 * 4u);
  EXPECT_EQ(node_cost(g, logits).flops, 2.0 * 32 * 10 * 256);
  EXPECT_EQ(node_cost(g, activated).flops, 32.0 * 256);
  EXPECT_EQ(node_cost(g, flat).flops, 0);
  EXPECT_EQ(node_cost(g, flat).bytes_read, 0u);
  EXPECT_EQ(node_cost(g, conv).flops, 2.0 * (8 * 24 * 24 * 16) * (5 * 5 * 3));
  EXPECT_EQ(node_cost(g, x).flops, 0);
  // The fused convolution: the convolution, its bias and its relu.
  EXPECT_EQ(node_cost(g, fused).flops, 2.0 * (8 * 24 * 24 * 16) * (5 * 5 * 3) + 2.0 * (8 * 24 * 24 * 16));

  const GraphCost cost = graph_cost(g, plan_memory(g));
  EXPECT_EQ(cost.kernels, 5);
  EXPECT_EQ(cost.flops, node_cost(g, product).flops + node_cost(g, activated).flops + node_cost(g, logits).flops +
                            node_cost(g, conv).flops + node_cost(g, fused).flops);
  EXPECT_EQ(cost.parameter_bytes, (784 * 256 + 10 * 256 + 5 * 5 * 3 * 16 + 16) * 4u);
  EXPECT_EQ(cost.gradient_bytes, 0u) << "nothing is updated";
  EXPECT_EQ(cost.input_bytes, (32 * 784 + 8 * 28 * 28 * 3) * 4u);
  EXPECT_EQ(cost.output_bytes, (320 + 2 * 8 * 24 * 24 * 16) * 4u);
  EXPECT_EQ(cost.bytes_by_dtype.at(DType::kF32), cost.bytes_read + cost.bytes_written);
}

TEST(GraphCost, ATracedAdamStepCountsParametersGradientsAndOptimizerSlots) {
  auto model = testing::make_mlp();
  Function step = function([&](const std::vector<Tensor>& in) { return model->step(in); }, {.name = "train_step"});
  const Tensor x = zeros({32, 784});
  const Tensor labels = zeros({32}, DType::kI64);
  const TracedGraph& traced = step.traced_for({x, labels, testing::Adam::step_size(1)});
  const GraphCost cost = graph_cost(traced.optimized, traced.plan);

  const uint64_t parameters = (784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10) * 4u;
  EXPECT_EQ(cost.parameter_bytes, parameters);
  EXPECT_EQ(cost.gradient_bytes, parameters);
  EXPECT_EQ(cost.state_bytes, 2 * parameters) << "Adam's m and v";
  EXPECT_EQ(cost.arena_bytes, traced.plan.arena_bytes);
  // Matmuls: the forward pass, one weight gradient per layer (as many FLOPs
  // as the forward), and input gradients for the two upper layers only.
  const double forward = 2.0 * 32 * (784 * 512 + 512 * 256 + 256 * 10);
  const double upper_input_gradients = 2.0 * 32 * (512 * 256 + 256 * 10);
  double matmul_flops = 0;
  for (int id = 0; id < static_cast<int>(traced.optimized.nodes().size()); ++id) {
    const Node& node = traced.optimized.node(id);
    // With the JIT on, the forward matmuls carry their bias and activation (fused_matmul), and each upper
    // layer's two gradient products are one matmul_pair.
    if (node.kind == NodeKind::kOp &&
        (node.op->name == "matmul" || node.op->name == "fused_matmul" || node.op->name == "matmul_pair")) {
      matmul_flops += node_cost(traced.optimized, id).flops;
    }
  }
  // Plus the forward bias adds and relus carried by fused_matmul, 2 per output element but the last layer's 1.
  const double epilogues = 32.0 * (2 * 512 + 2 * 256 + 10);
  EXPECT_EQ(matmul_flops, 2 * forward + upper_input_gradients + epilogues);
  // The rest is elementwise: Adam's update, ~10 operations per parameter,
  // and the activations' few per element.
  const double parameter_count = static_cast<double>(parameters) / 4;
  EXPECT_GT(cost.flops, matmul_flops + 5 * parameter_count);
  EXPECT_LT(cost.flops, matmul_flops + 20 * parameter_count);
  EXPECT_THAT(cost.to_string(), ::testing::HasSubstr("GFLOP"));
}

}  // namespace
}  // namespace nimbus::graph
