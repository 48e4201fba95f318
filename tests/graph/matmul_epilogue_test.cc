// Matmul epilogue fusion: matmul -> add(bias) -> activation becomes one
// fused_matmul node with the same results; shapes and readers that would
// change the meaning keep the ops apart.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nimbus/graph/executor.h"
#include "nimbus/graph/passes.h"
#include "nimbus/nimbus.h"
#include "nimbus/ops/registry.h"
#include "support/tensor_compare.h"

namespace nimbus::graph {
namespace {

const OpSchema& op(const char* name) { return OpRegistry::global().get(name); }
TensorSpec f32(std::initializer_list<int64_t> dims) { return {Shape(dims), DType::kF32}; }
const Attrs kPlain{{"transpose_a", false}, {"transpose_b", false}};

std::vector<Tensor> run(const Graph& graph, const std::vector<Tensor>& arguments) {
  Executor executor(graph, plan_memory(graph), Device::cpu());
  return executor.run(arguments);
}

// x @ w + bias (bias first or second in the add), then `activation` when given.
struct Layer {
  Graph g;
  int product = -1, added = -1, activated = -1;
  Layer(const Shape& bias_shape, const char* activation, bool bias_first = false) {
    const int x = g.add_argument(0, f32({8, 12}));
    const int w = g.add_argument(1, f32({12, 5}));
    const int bias = g.add_argument(2, {bias_shape, DType::kF32});
    product = g.add_op(op("matmul"), kPlain, {{x, 0}, {w, 0}}, {f32({8, 5})});
    added = g.add_op(
        op("add"), {},
        bias_first ? std::vector<ValueRef>{{bias, 0}, {product, 0}} : std::vector<ValueRef>{{product, 0}, {bias, 0}},
        {f32({8, 5})});
    activated =
        activation == nullptr
            ? added
            : g.add_op(op(activation),
                       std::string(activation) == "gelu" ? Attrs{{"approximate", std::string("tanh")}} : Attrs{},
                       {{added, 0}}, {f32({8, 5})});
    g.outputs() = {{activated, 0}};
  }
  std::vector<Tensor> arguments() const {
    return {random_normal({8, 12}), random_normal({12, 5}), random_normal(g.spec({2, 0}).shape)};
  }
};

const Node& only_op(const Graph& g) {
  for (const Node& node : g.nodes()) {
    if (node.kind == NodeKind::kOp) return node;
  }
  throw std::logic_error("no op");
}

TEST(MatmulEpilogue, FoldsBiasAndEachActivationIntoOneNodeWithTheSameResult) {
  for (const char* activation : {"relu", "sigmoid", "tanh", "gelu"}) {
    Layer layer(Shape{5}, activation);
    const std::vector<Tensor> args = layer.arguments();
    const Tensor unfused = run(layer.g, args)[0];
    EXPECT_EQ(fuse_matmul_epilogues(layer.g), 1) << activation;
    layer.g.compact();
    ASSERT_EQ(layer.g.op_count(), 1) << layer.g.to_text();
    EXPECT_EQ(only_op(layer.g).op->name, "fused_matmul");
    const std::string expected = std::string(activation) == "gelu" ? "gelu_tanh" : activation;
    EXPECT_EQ(only_op(layer.g).attrs.get_string("activation"), expected);
    EXPECT_LE(testing::relative_error(run(layer.g, args)[0], unfused), 1e-5) << activation;
  }
}

TEST(MatmulEpilogue, TakesTheBiasFromEitherSideAndLeavesAnActivationWithOtherReaders) {
  Layer layer(Shape{5}, "relu", /*bias_first=*/true);
  // A second reader of the pre-activation: the relu stays a node of its own.
  layer.g.outputs().push_back({layer.added, 0});
  const std::vector<Tensor> args = layer.arguments();
  const std::vector<Tensor> unfused = run(layer.g, args);
  EXPECT_EQ(fuse_matmul_epilogues(layer.g), 1);
  layer.g.compact();
  EXPECT_EQ(layer.g.op_count(), 2) << layer.g.to_text();
  EXPECT_THAT(layer.g.to_text(), ::testing::HasSubstr("activation=\"none\""));
  const std::vector<Tensor> fused = run(layer.g, args);
  EXPECT_LE(testing::relative_error(fused[0], unfused[0]), 1e-5);
  EXPECT_LE(testing::relative_error(fused[1], unfused[1]), 1e-5);
}

TEST(MatmulEpilogue, LeavesProductsWithOtherReadersAndNonVectorBiasesAlone) {
  Layer read_twice(Shape{5}, "relu");
  read_twice.g.outputs().push_back({read_twice.product, 0});
  EXPECT_EQ(fuse_matmul_epilogues(read_twice.g), 0);
  Layer matrix_bias(Shape{8, 5}, "relu");
  EXPECT_EQ(fuse_matmul_epilogues(matrix_bias.g), 0);
  Layer column_bias(Shape{8, 1}, nullptr);
  EXPECT_EQ(fuse_matmul_epilogues(column_bias.g), 0);
}

TEST(MatmulEpilogue, DoesNotMoveAProductPastAnUpdateOfItsWeight) {
  Graph g;
  const int x = g.add_argument(0, f32({4, 3}));
  const int w = g.add_capture(ones({3, 2}), "w");
  const int bias = g.add_argument(1, f32({2}));
  const int product = g.add_op(op("matmul"), kPlain, {{x, 0}, {w, 0}}, {f32({4, 2})});
  const int zero = g.add_op(op("sub"), {}, {{w, 0}, {w, 0}}, {f32({3, 2})});
  g.add_op(op("assign"), {}, {{w, 0}, {zero, 0}}, {});
  const int added = g.add_op(op("add"), {}, {{product, 0}, {bias, 0}}, {f32({4, 2})});
  g.outputs() = {{added, 0}};
  EXPECT_EQ(fuse_matmul_epilogues(g), 0);
}

}  // namespace
}  // namespace nimbus::graph
