// End to end: the PyTorch peer's MLP and CNN, trained 50 steps with Adam on
// Fashion-MNIST batches, end with the same loss and weights in eager, graph
// and graph+jit modes. Graph mode runs the same kernels in the same order, so
// it must match eager bit for bit; fusion evaluates elementwise chains with
// other (vectorized) code, so graph+jit matches within 1e-4 relative, and for
// the CNN within 1e-3, its biases within 1e-2: there the pooling gradient's
// kernel sums the convolutions' bias gradients per image
// (max_pool2d_relu_backward), in another order than the sum kernel's blocks.
// Adam's update is about the learning rate times the gradient's sign wherever
// a gradient is near zero, so 50 steps turn those last-bit differences into
// up to 4e-3 relative in the biases (which start at zero); the weights and the
// loss stay within 1e-3.
#include <gtest/gtest.h>

#include "nimbus/graph/function.h"
#include "nimbus/nimbus.h"
#include "support/step_models.h"
#include "support/tensor_compare.h"

namespace nimbus::testing {
namespace {

constexpr int kSteps = 50;

struct Trained {
  Tensor last_loss;
  std::vector<Tensor> params;
  int ops = 0;  // op nodes in the optimized graph (0 in eager mode)
};

template <typename MakeModel>
Trained train(MakeModel make_model, bool flat_images, int64_t batch, bool graph, bool jit) {
  std::unique_ptr<Model> model = make_model();
  Function step = function([&](const std::vector<Tensor>& in) { return model->step(in); },
                           {.name = "train_step", .graph = graph, .jit = jit});
  auto next_batch = fashion_batches(flat_images);
  Trained trained;
  for (int t = 1; t <= kSteps; ++t) {
    auto [x, y] = next_batch(batch);
    trained.last_loss = step({x, y, Adam::step_size(t)})[0];
    if (graph && t == 1) trained.ops = step.traced_for({x, y, Adam::step_size(t)}).optimized.op_count();
  }
  EXPECT_EQ(step.trace_count(), graph ? 1 : 0);
  for (const Variable& p : model->params) trained.params.push_back(p.value().clone());
  return trained;
}

template <typename MakeModel>
void expect_modes_agree(MakeModel make_model, bool flat_images, int64_t batch, double jit_tolerance = 1e-4,
                        double jit_bias_tolerance = 1e-4) {
  const Trained eager = train(make_model, flat_images, batch, false, false);
  const Trained graph = train(make_model, flat_images, batch, true, false);
  const Trained jit = train(make_model, flat_images, batch, true, true);
  // The run learned something: 50 Adam steps take the loss well below ln(10) = 2.30.
  EXPECT_LT(eager.last_loss.item<float>(), 1.2f);
  EXPECT_TRUE(bit_identical(graph.last_loss, eager.last_loss))
      << graph.last_loss.item<float>() << " vs " << eager.last_loss.item<float>();
  EXPECT_LE(relative_error(jit.last_loss, eager.last_loss), jit_tolerance)
      << jit.last_loss.item<float>() << " vs " << eager.last_loss.item<float>();
  for (size_t i = 0; i < eager.params.size(); ++i) {
    EXPECT_TRUE(bit_identical(graph.params[i], eager.params[i])) << "parameter " << i;
    const bool bias = eager.params[i].rank() == 1;
    EXPECT_LE(relative_error(jit.params[i], eager.params[i]), bias ? jit_bias_tolerance : jit_tolerance)
        << "parameter " << i;
  }
  EXPECT_LT(jit.ops, graph.ops) << "fusion merged nothing";
}

TEST(TrainingModes, MlpTrainsTheSameIn50StepsEagerGraphAndJit) {
  expect_modes_agree([] { return make_mlp(); }, true, 32);
}

TEST(TrainingModes, CnnTrainsTheSameIn50StepsEagerGraphAndJit) {
  expect_modes_agree([] { return make_cnn(); }, false, 16, 1e-3, 1e-2);
}

}  // namespace
}  // namespace nimbus::testing
