// Without a GPU: the steps `nimbus train` traces on CUDA (and the same with the
// fused Adam) have a CUDA kernel for every op node (the trainer needs the train layer, which the GPU-only build
// leaves out, so this suite is apart from tests/cuda).
#include <gtest/gtest.h>

#include <string>

#include "nimbus/graph/passes.h"
#include "nimbus/nimbus.h"
#include "nimbus/train/config.h"
#include "support/cuda_kernel_coverage.h"

namespace nimbus::cuda {
namespace {

using testing::expect_every_op_of_the_graph_has_a_cuda_kernel;

// A step as optimized for a CUDA device: traced here on the CPU, whose optimization adds fusions that run
// for CPU graphs alone (the pool-ReLU and ReLU-bias gradients, matmul pairs), so it is optimized again
// without them.
graph::Graph as_for_cuda(const TracedGraph& traced, bool jit) {
  graph::Graph g = traced.traced;
  graph::optimize(g, {.fuse_elementwise = jit,
                      .fuse_epilogues = jit,
                      .fuse_pool_relu_gradients = false,
                      .fuse_relu_bias_gradients = false,
                      .pair_matmuls = false});
  return g;
}

// The steps `nimbus train examples/fashion_mnist_mlp.yaml` traces (train::Adam with its i64 step
// counter and f64 rate, the loss, the accuracy metric), fusion on and off, and its predict step.
TEST(CudaTrainerSteps, EveryOpOfTheMlpConfigsStepsHasACudaKernel) {
  const nlohmann::json config = train::load_config("examples/fashion_mnist_mlp.yaml");
  train::Trainer trainer = train::compile_from_config(train::model_from_train_config(config), config);
  const Tensor x = random_uniform({64, 28, 28, 1}, 0, 1);
  const Tensor y = cast(random_uniform({64}, 0, 10, DType::kF64), DType::kU8);  // idx labels are u8
  for (const bool jit : {false, true}) {
    const std::string fusion = jit ? "fusion on" : "fusion off";
    expect_every_op_of_the_graph_has_a_cuda_kernel("train step, " + fusion,
                                                   as_for_cuda(trainer.trace_train_step(x, y, 1, jit), jit), 8);
    expect_every_op_of_the_graph_has_a_cuda_kernel("predict step, " + fusion,
                                                   as_for_cuda(trainer.trace_predict_step(x, jit), jit), 2);
  }
}

// The trainer on a GPU takes the fused Adam (fused left unset): traced here with fused: true, the train
// step updates every weight in one adam_update node, which has a CUDA kernel like the rest.
TEST(CudaTrainerSteps, TheFusedAdamStepUpdatesEveryWeightInOneNodeWithACudaKernel) {
  nlohmann::json config = train::load_config("examples/fashion_mnist_mlp.yaml");
  config["compile"]["optimizer"] = {{"name", "adam"}, {"fused", true}};
  train::Trainer trainer = train::compile_from_config(train::model_from_train_config(config), config);
  const Tensor x = random_uniform({64, 28, 28, 1}, 0, 1);
  const Tensor y = cast(random_uniform({64}, 0, 10, DType::kF64), DType::kU8);
  for (const bool jit : {false, true}) {
    const graph::Graph g = as_for_cuda(trainer.trace_train_step(x, y, 1, jit), jit);
    int updates = 0;
    for (const graph::Node& node : g.nodes()) {
      updates += !node.removed && node.kind == graph::NodeKind::kOp && node.op->name == "adam_update";
    }
    EXPECT_EQ(updates, 1) << g.to_text();
    expect_every_op_of_the_graph_has_a_cuda_kernel(std::string("fused Adam train step, fusion ") + (jit ? "on" : "off"),
                                                   g, 8);
  }
}

}  // namespace
}  // namespace nimbus::cuda
