// Without a GPU: the training steps that bench_gpu runs on CUDA (the MLP and
// CNN, and the transformer block and layer CNN under float32 and
// mixed_bfloat16), traced here on the CPU with fusion on and off, use only
// ops that have a CUDA kernel for their dtypes and shapes (so no node of the
// real run stops with "no kernel for dtype bf16 on cuda:0"). Kernels register
// from static initializers whether or not a GPU is present, so the registry
// tells. The traced ops are printed: docs/cuda.md lists them.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "nimbus/graph/function.h"
#include "nimbus/graph/passes.h"
#include "nimbus/nimbus.h"
#include "support/cuda_kernel_coverage.h"
#include "support/policy_step_models.h"
#include "support/step_models.h"

namespace nimbus::cuda {
namespace {

using testing::expect_every_op_of_the_graph_has_a_cuda_kernel;

// A model's training step (testing::Model::step on x, labels and Adam's step size), traced on the CPU and
// optimized as for a CUDA device, with fusion on and off: every op node has a CUDA kernel. (The CPU's own
// optimization adds the pool-ReLU and ReLU-bias gradient fusions and matmul pairs, which run for CPU graphs
// alone.)
void expect_every_op_has_a_cuda_kernel(const std::string& what,
                                       const std::function<std::unique_ptr<testing::Model>()>& make, const Tensor& x,
                                       const Tensor& labels) {
  for (const bool jit : {false, true}) {
    std::unique_ptr<testing::Model> model = make();
    testing::Model* m = model.get();
    Function step = function([m](const std::vector<Tensor>& in) { return m->step(in); },
                             {.name = "train_step", .graph = true, .jit = jit});
    graph::Graph g = step.traced_for({x, labels, testing::Adam::step_size(1)}).traced;
    graph::optimize(g, {.fuse_elementwise = jit,
                        .fuse_epilogues = jit,
                        .fuse_pool_relu_gradients = false,
                        .fuse_relu_bias_gradients = false,
                        .pair_matmuls = false});
    expect_every_op_of_the_graph_has_a_cuda_kernel(what + " step, fusion " + (jit ? "on" : "off"), g, 4);
  }
}

Tensor class_labels(int64_t batch) { return cast(random_uniform({batch}, 0, 10, DType::kF64), DType::kI64); }

TEST(CudaTrainingSteps, EveryOpOfTheMlpStepHasACudaKernel) {
  expect_every_op_has_a_cuda_kernel(
      "MLP", [] { return testing::make_mlp(Device::cpu(), 512); }, random_uniform({256, 784}, 0, 1), class_labels(256));
}

TEST(CudaTrainingSteps, EveryOpOfTheCnnStepHasACudaKernel) {
  expect_every_op_has_a_cuda_kernel(
      "CNN", [] { return testing::make_cnn(Device::cpu()); }, random_uniform({256, 28, 28, 1}, 0, 1),
      class_labels(256));
}

// bench_gpu's mixed-precision rows (issue 10): the transformer block at its full size and the layer CNN at
// batch 4,096, under float32 and mixed_bfloat16. Tracing records shapes and dtypes without computing.
class CudaPolicySteps : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaPolicySteps, EveryOpOfTheTransformerBlockStepHasACudaKernel) {
  const testing::TransformerBlockSize size;
  const Shape shape{16, size.sequence, size.d_model};
  expect_every_op_has_a_cuda_kernel(
      std::string("transformer block, ") + GetParam(),
      [&] { return testing::make_transformer_block(size, GetParam()); }, Tensor::empty(shape, DType::kF32),
      Tensor::empty(shape, DType::kF32));
}

TEST_P(CudaPolicySteps, EveryOpOfTheLayerCnnStepHasACudaKernel) {
  expect_every_op_has_a_cuda_kernel(
      std::string("layer CNN, ") + GetParam(), [] { return testing::make_layer_cnn(GetParam()); },
      Tensor::empty(Shape{4096, 28, 28, 1}, DType::kF32), class_labels(4096));
}

INSTANTIATE_TEST_SUITE_P(Policies, CudaPolicySteps, ::testing::Values("float32", "mixed_bfloat16"));

}  // namespace
}  // namespace nimbus::cuda
