// Epilogue fusion: matmul (or channels-last conv2d) -> add(bias) ->
// activation becomes one fused_matmul (fused_conv2d) node with the same
// results; shapes and readers that would change the meaning keep the ops
// apart.
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

TEST(EpilogueFusion, FoldsBiasAndEachActivationIntoOneNodeWithTheSameResult) {
  for (const char* activation : {"relu", "sigmoid", "tanh", "gelu"}) {
    Layer layer(Shape{5}, activation);
    const std::vector<Tensor> args = layer.arguments();
    const Tensor unfused = run(layer.g, args)[0];
    EXPECT_EQ(fuse_epilogues(layer.g), 1) << activation;
    layer.g.compact();
    ASSERT_EQ(layer.g.op_count(), 1) << layer.g.to_text();
    EXPECT_EQ(only_op(layer.g).op->name, "fused_matmul");
    const std::string expected = std::string(activation) == "gelu" ? "gelu_tanh" : activation;
    EXPECT_EQ(only_op(layer.g).attrs.get_string("activation"), expected);
    EXPECT_LE(testing::relative_error(run(layer.g, args)[0], unfused), 1e-5) << activation;
  }
}

TEST(EpilogueFusion, TakesTheBiasFromEitherSideAndLeavesAnActivationWithOtherReaders) {
  Layer layer(Shape{5}, "relu", /*bias_first=*/true);
  // A second reader of the pre-activation: the relu stays a node of its own.
  layer.g.outputs().push_back({layer.added, 0});
  const std::vector<Tensor> args = layer.arguments();
  const std::vector<Tensor> unfused = run(layer.g, args);
  EXPECT_EQ(fuse_epilogues(layer.g), 1);
  layer.g.compact();
  EXPECT_EQ(layer.g.op_count(), 2) << layer.g.to_text();
  EXPECT_THAT(layer.g.to_text(), ::testing::HasSubstr("activation=\"none\""));
  const std::vector<Tensor> fused = run(layer.g, args);
  EXPECT_LE(testing::relative_error(fused[0], unfused[0]), 1e-5);
  EXPECT_LE(testing::relative_error(fused[1], unfused[1]), 1e-5);
}

TEST(EpilogueFusion, LeavesProductsWithOtherReadersAndNonVectorBiasesAlone) {
  Layer read_twice(Shape{5}, "relu");
  read_twice.g.outputs().push_back({read_twice.product, 0});
  EXPECT_EQ(fuse_epilogues(read_twice.g), 0);
  Layer matrix_bias(Shape{8, 5}, "relu");
  EXPECT_EQ(fuse_epilogues(matrix_bias.g), 0);
  Layer column_bias(Shape{8, 1}, nullptr);
  EXPECT_EQ(fuse_epilogues(column_bias.g), 0);
}

TEST(EpilogueFusion, DoesNotMoveAProductPastAnUpdateOfItsWeight) {
  Graph g;
  const int x = g.add_argument(0, f32({4, 3}));
  const int w = g.add_capture(ones({3, 2}), "w");
  const int bias = g.add_argument(1, f32({2}));
  const int product = g.add_op(op("matmul"), kPlain, {{x, 0}, {w, 0}}, {f32({4, 2})});
  const int zero = g.add_op(op("sub"), {}, {{w, 0}, {w, 0}}, {f32({3, 2})});
  g.add_op(op("assign"), {}, {{w, 0}, {zero, 0}}, {});
  const int added = g.add_op(op("add"), {}, {{product, 0}, {bias, 0}}, {f32({4, 2})});
  g.outputs() = {{added, 0}};
  EXPECT_EQ(fuse_epilogues(g), 0);
}

Attrs conv_attrs(const char* data_format) {
  return Attrs{{"strides", std::vector<int64_t>{1, 1}},
               {"padding", std::string("same")},
               {"dilations", std::vector<int64_t>{1, 1}},
               {"groups", int64_t{1}},
               {"data_format", std::string(data_format)}};
}

TEST(EpilogueFusion, FoldsAChannelsLastConvolutionsBiasAndReluButNotChannelsFirst) {
  Graph g;
  const int x = g.add_argument(0, f32({2, 9, 9, 3}));
  const int filter = g.add_argument(1, f32({3, 3, 3, 8}));
  const int bias = g.add_argument(2, f32({8}));
  const int conv = g.add_op(op("conv2d"), conv_attrs("NHWC"), {{x, 0}, {filter, 0}}, {f32({2, 9, 9, 8})});
  const int added = g.add_op(op("add"), {}, {{conv, 0}, {bias, 0}}, {f32({2, 9, 9, 8})});
  const int activated = g.add_op(op("relu"), {}, {{added, 0}}, {f32({2, 9, 9, 8})});
  g.outputs() = {{activated, 0}};
  const std::vector<Tensor> args = {random_normal({2, 9, 9, 3}), random_normal({3, 3, 3, 8}), random_normal({8})};
  const Tensor unfused = run(g, args)[0];
  EXPECT_EQ(fuse_epilogues(g), 1);
  g.compact();
  ASSERT_EQ(g.op_count(), 1) << g.to_text();
  EXPECT_EQ(only_op(g).op->name, "fused_conv2d");
  EXPECT_EQ(only_op(g).attrs.get_string("padding"), "same");
  EXPECT_LE(testing::relative_error(run(g, args)[0], unfused), 1e-5);

  // NCHW: the bias would broadcast over the width, not the channels.
  Graph nchw;
  const int xc = nchw.add_argument(0, f32({2, 3, 9, 9}));
  const int fc = nchw.add_argument(1, f32({8, 3, 3, 3}));
  const int bc = nchw.add_argument(2, f32({9}));
  const int cc = nchw.add_op(op("conv2d"), conv_attrs("NCHW"), {{xc, 0}, {fc, 0}}, {f32({2, 8, 9, 9})});
  const int ac = nchw.add_op(op("add"), {}, {{cc, 0}, {bc, 0}}, {f32({2, 8, 9, 9})});
  nchw.outputs() = {{ac, 0}};
  EXPECT_EQ(fuse_epilogues(nchw), 0);
}

}  // namespace
}  // namespace nimbus::graph
