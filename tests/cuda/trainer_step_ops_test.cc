// Without a GPU: the steps `nimbus train examples/fashion_mnist_mlp.yaml`
// traces (and the same with the fused Adam) use only ops with a CUDA kernel
// that accepts their shapes and dtypes. Needs the train layer, so the
// GPU-only build leaves this file out (tests/cuda_suites.cmake).
#include <gtest/gtest.h>

#include <iostream>
#include <set>

#include "nimbus/device/backend.h"
#include "nimbus/graph/function.h"
#include "nimbus/nimbus.h"
#include "nimbus/ops/registry.h"
#include "nimbus/train/config.h"
#include "node_dispatch.h"

namespace nimbus::cuda {
namespace {

// The steps `nimbus train examples/fashion_mnist_mlp.yaml` traces (train::Adam with its i64 step
// counter and f64 rate, the loss, the accuracy metric), fusion on and off, and its predict step. The
// kernels' own `supports` checks are asked too, with (host) tensors of the node's shapes and dtypes.
// Whether some CUDA kernel of the node's op serves its dispatch dtype and accepts its dtypes.
bool has_cuda_kernel(const graph::Graph& g, const graph::Node& node, DType dispatch) {
  std::vector<Tensor> inputs, outputs;
  for (const graph::ValueRef& input : node.inputs)
    inputs.push_back(Tensor::empty(g.spec(input).shape, g.spec(input).dtype));
  for (const TensorSpec& output : node.outputs) outputs.push_back(Tensor::empty(output.shape, output.dtype));
  KernelContext context{*node.op, node.attrs, inputs, outputs, default_stream_for(Device::cpu())};
  for (const KernelDef& kernel : node.op->kernels(DeviceType::kCUDA, dispatch)) {
    if (kernel.supports == nullptr || kernel.supports(context)) return true;
  }
  return false;
}

void expect_every_op_of_the_graph_has_a_cuda_kernel(const std::string& what, const graph::Graph& g, size_t at_least) {
  std::set<std::string> used, missing;
  for (const graph::Node& node : g.nodes()) {
    if (node.removed || node.kind != graph::NodeKind::kOp) continue;
    const DType dtype = dispatch_dtype(g, node);
    const std::string name = node.op->name + " (" + std::string(dtype_name(dtype)) + ")";
    used.insert(name);
    if (!has_cuda_kernel(g, node, dtype)) missing.insert(name);
  }
  std::cout << what << ":";
  for (const std::string& op : used) std::cout << " " << op << ";";
  std::cout << "\n";
  EXPECT_TRUE(missing.empty()) << what << ": no CUDA kernel for: " << ::testing::PrintToString(missing);
  EXPECT_GE(used.size(), at_least) << what << ": tracing recorded almost nothing";
}

TEST(CudaTrainerSteps, EveryOpOfTheMlpConfigsStepsHasACudaKernel) {
  const nlohmann::json config = train::load_config("examples/fashion_mnist_mlp.yaml");
  train::Trainer trainer = train::compile_from_config(train::model_from_train_config(config), config);
  const Tensor x = random_uniform({64, 28, 28, 1}, 0, 1);
  const Tensor y = cast(random_uniform({64}, 0, 10, DType::kF64), DType::kU8);  // idx labels are u8
  for (const bool jit : {false, true}) {
    const std::string fusion = jit ? "fusion on" : "fusion off";
    expect_every_op_of_the_graph_has_a_cuda_kernel("train step, " + fusion,
                                                   trainer.trace_train_step(x, y, 1, jit).optimized, 8);
    expect_every_op_of_the_graph_has_a_cuda_kernel("predict step, " + fusion,
                                                   trainer.trace_predict_step(x, jit).optimized, 2);
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
    const graph::Graph& g = trainer.trace_train_step(x, y, 1, jit).optimized;
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
