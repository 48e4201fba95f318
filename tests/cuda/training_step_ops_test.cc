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
#include "node_dispatch.h"
#include "support/step_models.h"

namespace nimbus::cuda {
namespace {

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

}  // namespace
}  // namespace nimbus::cuda
