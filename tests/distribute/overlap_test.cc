// Bucketed all-reduce overlapped with the backward pass: the tape reports each
// gradient as soon as it is final (last layer first), each bucket's
// all_reduce_start is placed right there in the step's graph, ahead of the
// earlier layers' gradient ops, and the overlapped step trains to the same bits
// as the all-reduce after backward.
#include <gtest/gtest.h>

#include <algorithm>

#include "nimbus/autodiff/gradient_tape.h"
#include "nimbus/distribute/all_reduce.h"
#include "nimbus/graph/function.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/reduction.h"
#include "train/train_test_util.h"

namespace nimbus::testing {
namespace {

// Three dense layers without biases: w[0] first, w[2] last.
struct ThreeLayers {
  std::vector<Variable> w;
  ThreeLayers() {
    for (const char* name : {"w0", "w1", "w2"}) w.emplace_back(random_normal({8, 8}, 0, 0.3), name);
  }
  Tensor loss(const Tensor& x) const {
    return mean(matmul(relu(matmul(relu(matmul(x, w[0].value())), w[1].value())), w[2].value()));
  }
};

TEST(GradientReady, ReportsEachGradientOnceItIsFinalLastLayerFirst) {
  ThreeLayers model;
  const Tensor x = random_normal({4, 8});
  std::vector<size_t> order;
  std::vector<Tensor> reported(3);
  GradientTape tape;
  const Tensor loss = model.loss(x);
  tape.on_gradient_ready([&](size_t i, const Tensor& g) {
    order.push_back(i);
    reported[i] = g;
  });
  const std::vector<Tensor> grads = tape.gradient(loss, model.w);
  EXPECT_EQ(order, (std::vector<size_t>{2, 1, 0}));
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(values_of(reported[i]), values_of(grads[i])) << "w" << i;
}

TEST(GradientReady, AVariableUsedTwiceIsReportedAfterItsEarliestUse) {
  Variable w(random_normal({8, 8}, 0, 0.3), "w");
  const Tensor x = random_normal({4, 8});
  std::vector<Tensor> reported(1);
  int calls = 0;
  GradientTape tape;
  const Tensor loss = mean(matmul(relu(matmul(x, w.value())), w.value()));
  tape.on_gradient_ready([&](size_t i, const Tensor& g) {
    ++calls;
    reported[i] = g;
  });
  const std::vector<Tensor> grads = tape.gradient(loss, {w});
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(values_of(reported[0]), values_of(grads[0])) << "both uses' contributions";
}

TEST(OverlappedAllReduce, EachBucketStartsBeforeTheEarlierLayersGradientsAreComputed) {
  ThreeLayers model;
  FunctionOptions options;
  options.name = "overlapped";
  options.graph = true;
  options.jit = false;
  // One bucket per layer (each weight is 256 bytes).
  Function step = function(
      [&](const std::vector<Tensor>& in) {
        std::vector<Tensor> values;
        for (const Variable& v : model.w) values.push_back(v.value());
        distribute::OverlappedAllReduce reduce(values, 256);
        GradientTape tape;
        const Tensor loss = model.loss(in[0]);
        tape.on_gradient_ready([&](size_t i, const Tensor& g) { reduce.ready(i, g); });
        (void)tape.gradient(loss, model.w);
        std::vector<Tensor> summed = reduce.finish();
        summed.push_back(loss);
        return summed;
      },
      options);
  const graph::Graph& graph = step.traced_for({random_normal({4, 8})}).optimized;  // as it runs
  std::vector<size_t> starts, waits, matmuls;
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const graph::Node& node = graph.nodes()[n];
    if (node.op == nullptr) continue;
    if (node.op->name == "all_reduce_start") starts.push_back(n);
    if (node.op->name == "all_reduce_wait") waits.push_back(n);
    if (node.op->name == "matmul") matmuls.push_back(n);
  }
  ASSERT_EQ(starts.size(), 3u) << graph.to_text("overlapped");
  ASSERT_EQ(waits.size(), 3u) << graph.to_text("overlapped");
  // The last layer's bucket starts before the backward pass's last matmul (the first layer's gradient),
  // and every wait comes after every start.
  EXPECT_LT(starts[0], matmuls.back()) << graph.to_text("overlapped");
  EXPECT_LT(starts[1], matmuls.back()) << graph.to_text("overlapped");
  EXPECT_LT(starts.back(), waits.front()) << graph.to_text("overlapped");
  // Outside a replica the overlapped reduction is the identity: the gradients themselves.
  const std::vector<Tensor> x = {random_normal({4, 8})};
  const std::vector<Tensor> out = step(x);
  GradientTape tape;
  const Tensor loss = model.loss(x[0]);
  const std::vector<Tensor> grads = tape.gradient(loss, model.w);
  for (size_t i = 0; i < 3; ++i) EXPECT_LE(relative_norm_error(values_of(out[i]), values_of(grads[i])), 1e-6);
}

}  // namespace
}  // namespace nimbus::testing
