// Matmul pairing: a dense layer's two gradient products, adjacent and sharing the gradient, become one
// matmul_pair node whose outputs are the two products (within f32 rounding of the unfused ones; oneDNN on
// one thread or two sums each element in the same order here, so they are equal to the bit); products that
// are not adjacent, that read one another, share no input, are not 2-D f32, or have outputs past 2^17
// elements stay apart.
#include <gtest/gtest.h>

#include "nimbus/graph/executor.h"
#include "nimbus/graph/function.h"
#include "nimbus/graph/passes.h"
#include "nimbus/nimbus.h"
#include "nimbus/ops/registry.h"
#include "support/step_models.h"
#include "support/tensor_compare.h"

namespace nimbus::graph {
namespace {

const OpSchema& op(const char* name) { return OpRegistry::global().get(name); }

int count_matmul_pairs(const Graph& g) {
  int n = 0;
  for (const Node& node : g.nodes()) n += !node.removed && node.kind == NodeKind::kOp && node.op->name == "matmul_pair";
  return n;
}

// A dense layer's gradients as matmul's gradient rule traces them: g (batch, out), w (in, out), x (batch, in)
// -> grad_x = g @ wᵀ, then grad_w = xᵀ @ g; outputs grad_x and grad_w.
struct DenseGradients {
  Graph g;
  int grad = -1, weights = -1, x = -1, grad_x = -1, grad_w = -1;
  // With `op_between`, a neg(g) (also an output) sits between the two products.
  DenseGradients(int64_t batch, int64_t in, int64_t out, DType dtype = DType::kF32, bool op_between = false) {
    grad = g.add_argument(0, {Shape{batch, out}, dtype});
    weights = g.add_argument(1, {Shape{in, out}, dtype});
    x = g.add_argument(2, {Shape{batch, in}, dtype});
    grad_x = g.add_op(op("matmul"), Attrs{{"transpose_a", false}, {"transpose_b", true}}, {{grad, 0}, {weights, 0}},
                      {{Shape{batch, in}, dtype}});
    const int negated = op_between ? g.add_op(op("neg"), {}, {{grad, 0}}, {{Shape{batch, out}, dtype}}) : -1;
    grad_w = g.add_op(op("matmul"), Attrs{{"transpose_a", true}, {"transpose_b", false}}, {{x, 0}, {grad, 0}},
                      {{Shape{in, out}, dtype}});
    g.outputs() = {{grad_x, 0}, {grad_w, 0}};
    if (op_between) g.outputs().push_back({negated, 0});
  }
  std::vector<Tensor> arguments() const {
    std::vector<Tensor> args;
    for (int i = 0; i < 3; ++i) args.push_back(random_normal(g.spec({i, 0}).shape, 0, 1, g.spec({i, 0}).dtype));
    return args;
  }
};

std::vector<Tensor> run(const Graph& graph, const std::vector<Tensor>& arguments) {
  Executor executor(graph, plan_memory(graph), Device::cpu());
  return executor.run(arguments);
}

TEST(MatmulPairs, PairsADenseLayersGradientProducts) {
  // The MLP's layer 2 at batch 256 (side by side on a two-thread pool), a small layer (one after the other).
  for (const auto& [batch, in, out] : {std::tuple{256, 512, 256}, std::tuple{8, 5, 3}}) {
    DenseGradients dense(batch, in, out);
    const std::vector<Tensor> args = dense.arguments();
    const std::vector<Tensor> unfused = run(dense.g, args);
    EXPECT_EQ(pair_matmuls(dense.g), 1);
    dense.g.compact();
    EXPECT_EQ(count_matmul_pairs(dense.g), 1) << dense.g.to_text();
    EXPECT_EQ(dense.g.op_count(), 1) << dense.g.to_text();
    const std::vector<Tensor> paired = run(dense.g, args);
    ASSERT_EQ(paired.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(paired[i].shape(), unfused[i].shape());
      EXPECT_LE(testing::relative_error(paired[i], unfused[i]), 1e-6) << "batch " << batch << ", output " << i;
    }
  }
}

TEST(MatmulPairs, ReadersOfBothProductsReadThePair) {
  DenseGradients dense(16, 12, 8);
  Graph& g = dense.g;
  // Readers after the pair: grad_x + 1 and grad_w * 2.
  const int one = g.add_constant(full(Shape{}, 1.0));
  const int two = g.add_constant(full(Shape{}, 2.0));
  const int shifted = g.add_op(op("add"), {}, {{dense.grad_x, 0}, {one, 0}}, {{Shape{16, 12}, DType::kF32}});
  const int doubled = g.add_op(op("mul"), {}, {{dense.grad_w, 0}, {two, 0}}, {{Shape{12, 8}, DType::kF32}});
  g.outputs() = {{shifted, 0}, {doubled, 0}, {dense.grad_w, 0}};
  const std::vector<Tensor> args = dense.arguments();
  const std::vector<Tensor> unfused = run(g, args);
  ASSERT_EQ(pair_matmuls(g), 1);
  g.compact();
  const std::vector<Tensor> paired = run(g, args);
  for (size_t i = 0; i < unfused.size(); ++i) EXPECT_LE(testing::relative_error(paired[i], unfused[i]), 1e-6) << i;
}

TEST(MatmulPairs, LeavesProductsApartThatCannotRunSideBySide) {
  {
    DenseGradients dense(8, 5, 3, DType::kF32, /*op_between=*/true);
    EXPECT_EQ(pair_matmuls(dense.g), 0);
  }
  {
    DenseGradients dense(8, 5, 3);  // the second product reads the first
    dense.g.node(dense.grad_w).inputs = {{dense.grad_x, 0}, {dense.grad_x, 0}};
    dense.g.node(dense.grad_w).outputs[0].shape = Shape{5, 5};
    EXPECT_EQ(pair_matmuls(dense.g), 0);
  }
  {
    DenseGradients dense(8, 5, 3);  // no shared input
    const int other = dense.g.add_argument(3, {Shape{8, 3}, DType::kF32});
    dense.g.node(dense.grad_w).inputs[1] = {other, 0};
    EXPECT_EQ(pair_matmuls(dense.g), 0);
  }
  {
    DenseGradients dense(8, 5, 3, DType::kF64);  // matmul_pair's fast kernel is f32's
    EXPECT_EQ(pair_matmuls(dense.g), 0);
  }
  {
    DenseGradients dense(128, 3136, 128);  // the CNN example's dense layer: outputs past 2^17 elements
    EXPECT_EQ(pair_matmuls(dense.g), 0);
  }
}

// End to end: the MLP's traced training step with the JIT switch pairs the gradient products of its last two
// layers (TrainingModes checks that the step still trains as eager does).
TEST(MatmulPairs, TracedMlpStepPairsTheGradientProducts) {
  auto model = testing::make_mlp(Device::cpu(), 64);
  testing::Model* m = model.get();
  Function step = function([m](const std::vector<Tensor>& in) { return m->step(in); },
                           {.name = "train_step", .graph = true, .jit = true});
  const Tensor x = random_uniform({32, 784}, 0, 1);
  const Tensor labels = cast(random_uniform({32}, 0, 10, DType::kF64), DType::kI64);
  const Graph& optimized = step.traced_for({x, labels, testing::Adam::step_size(1)}).optimized;
  EXPECT_EQ(count_matmul_pairs(optimized), 2) << optimized.to_text();  // the last two layers; the first has no grad_x
}

}  // namespace
}  // namespace nimbus::graph
