// The ReLU gradient fusions (src/graph/passes/pool_relu_gradient.cc).
// Pool-ReLU: where(greater(x, 0), max_pool2d_backward(g, x), 0) becomes one max_pool2d_relu_backward node with
// the same result to the bit, and a per-channel sum of that result (a convolution's bias gradient) reads the
// node's second output; other readers, other zeros or another x keep the ops apart.
// ReLU-bias: where(greater(y, 0), p, 0) and its sum over all but the last axis (a dense layer's bias gradient)
// become one relu_bias_backward node whose outputs are the unfused ones to the bit; another threshold, another
// sum, no sum, another dtype, or a comparison read elsewhere keep the ops apart.
#include <gtest/gtest.h>

#include "nimbus/graph/executor.h"
#include "nimbus/graph/function.h"
#include "nimbus/graph/passes.h"
#include "nimbus/nimbus.h"
#include "nimbus/ops/registry.h"
#include "support/tensor_compare.h"

namespace nimbus::graph {
namespace {

const OpSchema& op(const char* name) { return OpRegistry::global().get(name); }
TensorSpec f32(std::initializer_list<int64_t> dims) { return {Shape(dims), DType::kF32}; }

std::vector<Tensor> run(const Graph& graph, const std::vector<Tensor>& arguments) {
  Executor executor(graph, plan_memory(graph), Device::cpu());
  return executor.run(arguments);
}

int count_ops(const Graph& g, const char* name) {
  int n = 0;
  for (const Node& node : g.nodes()) n += !node.removed && node.kind == NodeKind::kOp && node.op->name == name;
  return n;
}

// The backward pass of relu -> max_pool2d as the gradient rules trace it: g (2,3,4,5) and x (2,6,8,5) NHWC,
// 2x2 windows (or 3x3 overlapping ones with stride 1), compared with and selecting `zero` (a scalar constant 0
// unless given).
struct PoolReluBackward {
  Graph g;
  int pooled = -1, condition = -1, selected = -1, other_x = -1;
  explicit PoolReluBackward(bool overlapping = false, Tensor zero = full(Shape{}, 0.0)) {
    const Shape y_shape = overlapping ? Shape{2, 4, 6, 5} : Shape{2, 3, 4, 5};
    const int grad = g.add_argument(0, {y_shape, DType::kF32});
    const int x = g.add_argument(1, f32({2, 6, 8, 5}));
    other_x = g.add_argument(2, f32({2, 6, 8, 5}));
    const int zeros = g.add_constant(zero);
    const int64_t size = overlapping ? 3 : 2, stride = overlapping ? 1 : 2;
    const Attrs attrs{{"pool_size", std::vector<int64_t>{size, size}},
                      {"strides", std::vector<int64_t>{stride, stride}},
                      {"padding", std::string("valid")},
                      {"data_format", std::string("NHWC")}};
    pooled = g.add_op(op("max_pool2d_backward"), attrs, {{grad, 0}, {x, 0}}, {f32({2, 6, 8, 5})});
    condition = g.add_op(op("greater"), {}, {{x, 0}, {zeros, 0}}, {{Shape{2, 6, 8, 5}, DType::kBool}});
    selected = g.add_op(op("where"), {}, {{condition, 0}, {pooled, 0}, {zeros, 0}}, {f32({2, 6, 8, 5})});
    g.outputs() = {{selected, 0}};
  }
  std::vector<Tensor> arguments() const {
    return {random_normal(g.spec({0, 0}).shape), random_normal({2, 6, 8, 5}), random_normal({2, 6, 8, 5})};
  }
};

TEST(PoolReluGradient, FusesIntoOneNodeWithTheSameResultToTheBit) {
  for (const bool overlapping : {false, true}) {
    PoolReluBackward backward(overlapping);
    std::vector<Tensor> args = backward.arguments();
    // Ties and zeros in x: the first maximum takes the gradient, and a window whose maximum is 0 passes none.
    Tensor& x = args[1];
    x = where(less(x, full(Shape{}, -0.5)), full(Shape{}, 0.0), x);
    x = where(greater(x, full(Shape{}, 1.0)), full(Shape{}, 1.0), x);
    const Tensor unfused = run(backward.g, args)[0];
    EXPECT_EQ(fuse_pool_relu_gradients(backward.g), 1);
    backward.g.compact();
    EXPECT_EQ(count_ops(backward.g, "max_pool2d_relu_backward"), 1) << backward.g.to_text();
    EXPECT_EQ(backward.g.op_count(), 1) << backward.g.to_text();
    const Tensor fused = run(backward.g, args)[0];
    EXPECT_EQ(fused.to_vector<float>(), unfused.to_vector<float>()) << "overlapping " << overlapping;
  }
}

TEST(PoolReluGradient, TheBiasGradientReadsTheFusedChannelSums) {
  for (const bool keepdims : {true, false}) {
    PoolReluBackward backward;
    Graph& g = backward.g;
    const Shape summed_shape = keepdims ? Shape{1, 1, 1, 5} : Shape{5};
    const int summed = g.add_op(op("sum"), Attrs{{"axes", std::vector<int64_t>{0, 1, 2}}, {"keepdims", keepdims}},
                                {{backward.selected, 0}}, {{summed_shape, DType::kF32}});
    const int bias = keepdims
                         ? g.add_op(op("reshape"), Attrs{{"shape", std::vector<int64_t>{5}}}, {{summed, 0}}, {f32({5})})
                         : summed;
    g.outputs().push_back({bias, 0});
    const std::vector<Tensor> args = backward.arguments();
    const std::vector<Tensor> unfused = run(g, args);
    EXPECT_EQ(fuse_pool_relu_gradients(g), 1);
    eliminate_dead_code(g);
    g.compact();
    EXPECT_EQ(g.op_count(), 1) << g.to_text();
    const std::vector<Tensor> fused = run(g, args);
    EXPECT_EQ(fused[0].to_vector<float>(), unfused[0].to_vector<float>());
    EXPECT_EQ(fused[1].shape(), Shape{5});
    EXPECT_LE(testing::relative_error(fused[1], unfused[1]), 1e-6) << "keepdims " << keepdims;
  }
}

TEST(PoolReluGradient, LeavesTheOpsApartWhenTheMeaningWouldChange) {
  {
    PoolReluBackward backward;  // the pooling gradient is read elsewhere too
    backward.g.outputs().push_back({backward.pooled, 0});
    EXPECT_EQ(fuse_pool_relu_gradients(backward.g), 0);
  }
  {
    PoolReluBackward backward(false, full(Shape{}, 0.5));  // not relu's gradient: the threshold is 0.5
    EXPECT_EQ(fuse_pool_relu_gradients(backward.g), 0);
  }
  {
    // A sum over other axes is not the bias gradient: it stays, reading the fused node's first output.
    PoolReluBackward backward;
    const int summed = backward.g.add_op(op("sum"), Attrs{{"axes", std::vector<int64_t>{0, 1}}, {"keepdims", false}},
                                         {{backward.selected, 0}}, {f32({8, 5})});
    backward.g.outputs().push_back({summed, 0});
    EXPECT_EQ(fuse_pool_relu_gradients(backward.g), 1);
    EXPECT_EQ(count_ops(backward.g, "sum"), 1);
  }
  {
    PoolReluBackward backward;  // the mask compares another tensor than the pooling's input
    backward.g.nodes()[static_cast<size_t>(backward.condition)].inputs[0] = {backward.other_x, 0};
    EXPECT_EQ(fuse_pool_relu_gradients(backward.g), 0);
  }
}

// End to end: relu -> max_pool2d traced with the JIT switch runs the fused node, and its gradient is eager's.
TEST(PoolReluGradient, TracedReluPoolGradientMatchesEager) {
  const Tensor z = random_normal({3, 8, 8, 4});
  const auto gradient = [](const std::vector<Tensor>& in) {
    GradientTape tape;
    tape.watch(in[0]);
    const Tensor loss = sum(square(max_pool2d(relu(in[0]), {.pool_size = {2, 2}})));
    return std::vector<Tensor>{tape.gradient(loss, {in[0]})[0]};
  };
  const Tensor eager = gradient({z})[0];
  Function traced = function(gradient, {.name = "relu_pool_gradient", .graph = true, .jit = true});
  const Tensor from_graph = traced({z})[0];
  EXPECT_EQ(from_graph.to_vector<float>(), eager.to_vector<float>());
  const Graph& optimized = traced.traced_for({z}).optimized;
  EXPECT_EQ(count_ops(optimized, "max_pool2d_relu_backward"), 1) << optimized.to_text();
}

// relu's gradient as its gradient rule traces it, r = where(greater(y, 0), p, 0), then the bias gradient: r
// summed over all but the last axis, to (C) or with kept dims and a reshape to (C). Outputs r and the sum.
struct ReluBiasBackward {
  Graph g;
  Shape shape;
  int condition = -1, selected = -1, summed = -1;
  explicit ReluBiasBackward(Shape shape_, bool keepdims = false, DType dtype = DType::kF32,
                            Tensor threshold = full(Shape{}, 0.0))
      : shape(std::move(shape_)) {
    const int p = g.add_argument(0, {shape, dtype});
    const int y = g.add_argument(1, {shape, dtype});
    const int zero = g.add_constant(full(Shape{}, 0.0, dtype));
    const int compared_with = g.add_constant(threshold.to(dtype));
    condition = g.add_op(op("greater"), {}, {{y, 0}, {compared_with, 0}}, {{shape, DType::kBool}});
    selected = g.add_op(op("where"), {}, {{condition, 0}, {p, 0}, {zero, 0}}, {{shape, dtype}});
    std::vector<int64_t> leading_axes, kept_dims;
    for (int64_t axis = 0; axis + 1 < shape.rank(); ++axis) {
      leading_axes.push_back(axis);
      kept_dims.push_back(1);
    }
    const int64_t channels = shape[shape.rank() - 1];
    kept_dims.push_back(channels);
    summed = g.add_op(op("sum"), Attrs{{"axes", leading_axes}, {"keepdims", keepdims}}, {{selected, 0}},
                      {{keepdims ? Shape(kept_dims) : Shape{channels}, dtype}});
    const int bias = keepdims ? g.add_op(op("reshape"), Attrs{{"shape", std::vector<int64_t>{channels}}}, {{summed, 0}},
                                         {{Shape{channels}, dtype}})
                              : summed;
    g.outputs() = {{selected, 0}, {bias, 0}};
  }
  std::vector<Tensor> arguments() const {
    // y with exact zeros (relu's output), which select 0.
    const Tensor y = random_normal(shape, 0, 1, g.spec({1, 0}).dtype);
    return {random_normal(shape, 0, 1, g.spec({0, 0}).dtype), where(less(y, full(Shape{}, 0.0)), zeros_like(y), y)};
  }
};

TEST(ReluBiasGradient, FusesIntoOneNodeWithTheSameOutputsToTheBit) {
  // One block of rows; several blocks of rows and columns, the last ones partial; the same split over threads
  // (1024 x 600: past the kernel's grain); rank 3.
  const Shape shapes[] = {{32, 70}, {300, 517}, {256, 512}, {1024, 600}, {4, 6, 5}};
  for (const Shape& shape : shapes) {
    for (const bool keepdims : {false, true}) {
      ReluBiasBackward backward(shape, keepdims);
      const std::vector<Tensor> args = backward.arguments();
      const std::vector<Tensor> unfused = run(backward.g, args);
      EXPECT_EQ(fuse_relu_bias_gradients(backward.g), 1);
      eliminate_dead_code(backward.g);
      backward.g.compact();
      EXPECT_EQ(count_ops(backward.g, "relu_bias_backward"), 1) << backward.g.to_text();
      EXPECT_EQ(backward.g.op_count(), 1) << backward.g.to_text();
      const std::vector<Tensor> fused = run(backward.g, args);
      EXPECT_EQ(fused[0].to_vector<float>(), unfused[0].to_vector<float>()) << shape.to_string();
      EXPECT_EQ(fused[1].shape(), Shape{shape[shape.rank() - 1]});
      EXPECT_EQ(fused[1].to_vector<float>(), unfused[1].to_vector<float>())
          << shape.to_string() << " keepdims " << keepdims;
    }
  }
}

// The fused kernel's bias gradient against plain f64 loops over the rows.
TEST(ReluBiasGradient, BiasGradientIsTheSumOfTheSelectedRows) {
  const Shape shape{300, 517};
  ReluBiasBackward backward(shape);
  const std::vector<Tensor> args = backward.arguments();
  ASSERT_EQ(fuse_relu_bias_gradients(backward.g), 1);
  const std::vector<Tensor> fused = run(backward.g, args);
  const std::vector<float> p = args[0].to_vector<float>(), y = args[1].to_vector<float>();
  const std::vector<float> bias = fused[1].to_vector<float>();
  for (int64_t c = 0; c < shape[1]; ++c) {
    double total = 0;
    for (int64_t r = 0; r < shape[0]; ++r) {
      const size_t at = static_cast<size_t>(r * shape[1] + c);
      total += y[at] > 0 ? p[at] : 0.0;
    }
    EXPECT_NEAR(bias[static_cast<size_t>(c)], total, 1e-5 * (1 + std::abs(total))) << "column " << c;
  }
}

TEST(ReluBiasGradient, LeavesTheOpsApartWhenTheMeaningWouldChange) {
  {
    ReluBiasBackward backward({8, 6});  // the comparison is read elsewhere too
    backward.g.outputs().push_back({backward.condition, 0});
    EXPECT_EQ(fuse_relu_bias_gradients(backward.g), 0);
  }
  {
    ReluBiasBackward backward({8, 6}, false, DType::kF32, full(Shape{}, 0.5));  // not relu's gradient
    EXPECT_EQ(fuse_relu_bias_gradients(backward.g), 0);
  }
  {
    ReluBiasBackward backward({8, 6}, false, DType::kF64);  // the fast kernel is f32's: f64 keeps where and sum
    EXPECT_EQ(fuse_relu_bias_gradients(backward.g), 0);
  }
  {
    // No bias gradient: where alone stays for elementwise fusion.
    ReluBiasBackward backward({8, 6});
    backward.g.node(backward.summed).removed = true;
    backward.g.outputs() = {{backward.selected, 0}};
    EXPECT_EQ(fuse_relu_bias_gradients(backward.g), 0);
  }
  {
    // A sum over the last axis is not a bias gradient.
    ReluBiasBackward backward({8, 6});
    Node& summed = backward.g.nodes()[static_cast<size_t>(backward.summed)];
    summed.attrs.set("axes", std::vector<int64_t>{1});
    summed.outputs[0].shape = Shape{8};
    EXPECT_EQ(fuse_relu_bias_gradients(backward.g), 0);
  }
}

// End to end: a dense layer with relu traced with the JIT switch runs the fused node, and its gradients are
// eager's to the bit.
TEST(ReluBiasGradient, TracedDenseReluGradientMatchesEager) {
  const Tensor x = random_normal({64, 20});
  const Tensor w = random_normal({20, 300});
  const Tensor b = random_normal({300});
  const auto gradient = [](const std::vector<Tensor>& in) {
    GradientTape tape;
    tape.watch(in[1]);
    tape.watch(in[2]);
    const Tensor loss = sum(square(relu(matmul(in[0], in[1]) + in[2])));
    return tape.gradient(loss, {in[1], in[2]});
  };
  const std::vector<Tensor> eager = gradient({x, w, b});
  Function traced = function(gradient, {.name = "dense_relu_gradient", .graph = true, .jit = true});
  const std::vector<Tensor> from_graph = traced({x, w, b});
  EXPECT_EQ(from_graph[0].to_vector<float>(), eager[0].to_vector<float>());
  EXPECT_EQ(from_graph[1].to_vector<float>(), eager[1].to_vector<float>());
  const Graph& optimized = traced.traced_for({x, w, b}).optimized;
  EXPECT_EQ(count_ops(optimized, "relu_bias_backward"), 1) << optimized.to_text();
}

}  // namespace
}  // namespace nimbus::graph
