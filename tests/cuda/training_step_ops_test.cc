// Without a GPU: the MLP and CNN training steps that bench_gpu runs on CUDA,
// traced here on the CPU with fusion on and off, use only ops that have a
// CUDA kernel for their dtype (so no node of the real run stops with
// "no kernel for dtype f32 on cuda:0"). Kernels register from static
// initializers whether or not a GPU is present, so the registry tells.
// The traced ops are printed: docs/cuda.md lists them.
#include <gtest/gtest.h>

#include <iostream>
#include <set>

#include "nimbus/device/backend.h"
#include "nimbus/graph/function.h"
#include "nimbus/nimbus.h"
#include "nimbus/ops/registry.h"
#include "nimbus/train/config.h"
#include "support/step_models.h"

namespace nimbus::cuda {
namespace {

// The dtype a node's kernel is chosen by: its dispatch input's, or its output's.
DType dispatch_dtype(const graph::Graph& g, const graph::Node& node) {
  return node.op->dispatch_input < 0 || node.inputs.empty()
             ? node.outputs[0].dtype
             : g.spec(node.inputs[static_cast<size_t>(node.op->dispatch_input)]).dtype;
}

// "op (dtype)" for every op node of the optimized step that has no CUDA kernel for its dispatch dtype;
// `used` collects every op node's "op (dtype)".
std::set<std::string> ops_without_cuda_kernels(std::unique_ptr<testing::Model> model, const Tensor& x, bool jit,
                                               std::set<std::string>& used) {
  testing::Model* m = model.get();
  Function step = function([m](const std::vector<Tensor>& in) { return m->step(in); },
                           {.name = "train_step", .graph = true, .jit = jit});
  const Tensor labels = cast(random_uniform({x.dim(0)}, 0, 10, DType::kF64), DType::kI64);
  const graph::Graph& g = step.traced_for({x, labels, testing::Adam::step_size(1)}).optimized;
  std::set<std::string> missing;
  for (const graph::Node& node : g.nodes()) {
    if (node.removed || node.kind != graph::NodeKind::kOp) continue;
    const DType dtype = dispatch_dtype(g, node);
    const std::string name = node.op->name + " (" + std::string(dtype_name(dtype)) + ")";
    used.insert(name);
    if (node.op->kernels(DeviceType::kCUDA, dtype).empty()) missing.insert(name);
  }
  return missing;
}

void expect_every_op_has_a_cuda_kernel(const char* what, const std::function<std::unique_ptr<testing::Model>()>& make,
                                       const Tensor& x) {
  for (const bool jit : {false, true}) {
    std::set<std::string> used;
    const std::set<std::string> missing = ops_without_cuda_kernels(make(), x, jit, used);
    std::cout << what << " step, fusion " << (jit ? "on" : "off") << ":";
    for (const std::string& op : used) std::cout << " " << op << ";";
    std::cout << "\n";
    EXPECT_TRUE(missing.empty()) << what << ", fusion " << (jit ? "on" : "off")
                                 << ": no CUDA kernel for: " << ::testing::PrintToString(missing);
    EXPECT_GE(used.size(), 4u) << "tracing recorded almost nothing";
  }
}

TEST(CudaTrainingSteps, EveryOpOfTheMlpStepHasACudaKernel) {
  expect_every_op_has_a_cuda_kernel(
      "MLP", [] { return testing::make_mlp(Device::cpu(), 512); }, random_uniform({256, 784}, 0, 1));
}

TEST(CudaTrainingSteps, EveryOpOfTheCnnStepHasACudaKernel) {
  expect_every_op_has_a_cuda_kernel(
      "CNN", [] { return testing::make_cnn(Device::cpu()); }, random_uniform({256, 28, 28, 1}, 0, 1));
}

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
