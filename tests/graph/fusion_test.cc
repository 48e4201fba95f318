// Elementwise fusion: which chains fuse, where clusters must stop, and that a
// fused graph computes what the unfused one does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nimbus/graph/executor.h"
#include "nimbus/graph/function.h"
#include "nimbus/graph/passes.h"
#include "nimbus/nimbus.h"
#include "nimbus/ops/fused_elementwise.h"
#include "nimbus/ops/registry.h"

namespace nimbus::graph {
namespace {

using ::testing::HasSubstr;

const OpSchema& op(const char* name) { return OpRegistry::global().get(name); }
TensorSpec f32(std::initializer_list<int64_t> dims) { return {Shape(dims), DType::kF32}; }

std::vector<Tensor> run(const Graph& graph, const std::vector<Tensor>& arguments) {
  Executor executor(graph, plan_memory(graph), Device::cpu());
  return executor.run(arguments);
}

int count_fused(const Graph& g) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.kind == NodeKind::kOp && node.op == &fused_elementwise_op();
  return n;
}

TEST(Fusion, FusesAChainWithBroadcastInputsIntoOneNode) {
  Graph g;
  const int x = g.add_argument(0, f32({8, 16}));
  const int bias = g.add_argument(1, f32({16}));
  const int added = g.add_op(op("add"), {}, {{x, 0}, {bias, 0}}, {f32({8, 16})});
  const int act = g.add_op(op("gelu"), Attrs{{"approximate", std::string("tanh")}}, {{added, 0}}, {f32({8, 16})});
  const int scaled = g.add_op(op("mul"), {}, {{act, 0}, {x, 0}}, {f32({8, 16})});
  g.outputs() = {{scaled, 0}};
  const std::vector<Tensor> args = {random_normal({8, 16}), random_normal({16})};
  const Tensor unfused = run(g, args)[0];
  EXPECT_EQ(fuse_elementwise(g), 1);
  EXPECT_EQ(g.op_count(), 1) << g.to_text();
  const Node& fused = g.nodes().back();
  EXPECT_THAT(fused.attrs.to_string(),
              HasSubstr("t0 = add(i0, i1); t1 = gelu(t0) {approximate=\"tanh\"}; t2 = mul(t1, i0) -> t2"));
  EXPECT_LE(std::abs(sum(abs(run(g, args)[0] - unfused)).item<double>()), 1e-4);
}

TEST(Fusion, MergesTwoOpenChainsThatMeet) {
  Graph g;
  const int x = g.add_argument(0, f32({5, 7}));
  const int y = g.add_argument(1, f32({5, 7}));
  const int e = g.add_op(op("exp"), {}, {{x, 0}}, {f32({5, 7})});
  const int n = g.add_op(op("neg"), {}, {{y, 0}}, {f32({5, 7})});
  const int s = g.add_op(op("square"), {}, {{n, 0}}, {f32({5, 7})});
  const int a = g.add_op(op("add"), {}, {{e, 0}, {s, 0}}, {f32({5, 7})});
  g.outputs() = {{a, 0}};
  const std::vector<Tensor> args = {random_normal({5, 7}), random_normal({5, 7})};
  const Tensor unfused = run(g, args)[0];
  EXPECT_EQ(fuse_elementwise(g), 1);
  EXPECT_EQ(g.op_count(), 1) << g.to_text();
  EXPECT_THAT(g.to_text(), HasSubstr("t0 = exp(i0); t1 = neg(i1); t2 = square(t1); t3 = add(t0, t2) -> t3"));
  EXPECT_LE(std::abs(sum(abs(run(g, args)[0] - unfused)).item<double>()), 1e-5);
}

TEST(Fusion, AnOutsideReaderClosesTheClusterAndEscapingValuesBecomeOutputs) {
  Graph g;
  const int x = g.add_argument(0, f32({4, 4}));
  const int w = g.add_argument(1, f32({4, 4}));
  const int e = g.add_op(op("exp"), {}, {{x, 0}}, {f32({4, 4})});
  const int n = g.add_op(op("neg"), {}, {{e, 0}}, {f32({4, 4})});
  // matmul reads n: the cluster {exp, neg} closes; the next elementwise op starts a new one.
  const int m =
      g.add_op(op("matmul"), Attrs{{"transpose_a", false}, {"transpose_b", false}}, {{n, 0}, {w, 0}}, {f32({4, 4})});
  const int a = g.add_op(op("add"), {}, {{m, 0}, {e, 0}}, {f32({4, 4})});
  const int r = g.add_op(op("relu"), {}, {{a, 0}}, {f32({4, 4})});
  g.outputs() = {{r, 0}};
  const std::vector<Tensor> args = {random_normal({4, 4}), random_normal({4, 4})};
  const Tensor unfused = run(g, args)[0];
  EXPECT_EQ(fuse_elementwise(g), 2);
  // The first fused node outputs both exp (read later by add) and neg (read by matmul).
  int two_output_nodes = 0;
  for (const Node& node : g.nodes()) two_output_nodes += node.kind == NodeKind::kOp && node.outputs.size() == 2;
  EXPECT_EQ(two_output_nodes, 1) << g.to_text();
  EXPECT_LE(std::abs(sum(abs(run(g, args)[0] - unfused)).item<double>()), 1e-4);
}

TEST(Fusion, DoesNotFuseAcrossAnUpdateOrAcrossShapes) {
  Graph g;
  const int x = g.add_argument(0, f32({3}));
  const int w = g.add_capture(ones({3}), "w");
  const int read = g.add_op(op("mul"), {}, {{x, 0}, {w, 0}}, {f32({3})});
  const int doubled = g.add_op(op("add"), {}, {{read, 0}, {read, 0}}, {f32({3})});
  g.add_op(op("assign"), {}, {{w, 0}, {doubled, 0}}, {});
  const int after = g.add_op(op("mul"), {}, {{x, 0}, {w, 0}}, {f32({3})});
  const int total =
      g.add_op(op("sum"), Attrs{{"axes", std::vector<int64_t>{}}, {"keepdims", false}}, {{after, 0}}, {f32({})});
  const int plus = g.add_op(op("exp"), {}, {{total, 0}}, {f32({})});
  g.outputs() = {{after, 0}, {plus, 0}};
  EXPECT_EQ(fuse_elementwise(g), 1);  // {mul, add} before the assign; nothing else pairs up
  EXPECT_EQ(count_fused(g), 1);
}

// A block with GELU, layer norm and a residual add: fused vs unfused through nimbus::function.
TEST(Fusion, JitMatchesUnfusedOnAnElementwiseHeavyTrainingStep) {
  auto make = [](bool jit) {
    auto w = std::make_shared<std::vector<Variable>>();
    Generator gen(5);
    *w = {Variable(random_normal({32, 32}, 0, 0.2, DType::kF32, Device::cpu(), &gen), "w"),
          Variable(ones({32}), "gamma"), Variable(zeros({32}), "beta")};
    Function step = function(
        [w](const std::vector<Tensor>& in) {
          GradientTape tape;
          const Tensor h = gelu(matmul(in[0], (*w)[0].value()));
          const Tensor y = layer_norm(h + in[0], (*w)[1].value(), (*w)[2].value());
          const Tensor loss = mean(square(y - in[1]));
          const auto grads = tape.gradient(loss, *w);
          for (size_t i = 0; i < w->size(); ++i) (*w)[i].assign_sub(grads[i] * 0.1);
          return std::vector<Tensor>{loss};
        },
        {.name = jit ? "jit" : "nojit", .jit = jit});
    return std::make_pair(step, w);
  };
  auto [fused_step, fused_w] = make(true);
  auto [plain_step, plain_w] = make(false);
  Generator gen(9);
  const Tensor x = random_normal({16, 32}, 0, 1, DType::kF32, Device::cpu(), &gen);
  const Tensor target = random_normal({16, 32}, 0, 1, DType::kF32, Device::cpu(), &gen);
  for (int i = 0; i < 5; ++i) {
    const double a = fused_step({x, target})[0].item<double>();
    const double b = plain_step({x, target})[0].item<double>();
    EXPECT_NEAR(a, b, 1e-5 * std::abs(b)) << "step " << i;
  }
  const TracedGraph& traced = fused_step.traced_for({x, target});
  EXPECT_GT(count_fused(traced.optimized), 0) << traced.optimized.to_text();
  EXPECT_LT(traced.optimized.op_count(), plain_step.traced_for({x, target}).optimized.op_count());
}

}  // namespace
}  // namespace nimbus::graph
