// Whether every op node of a traced graph has a CUDA kernel, checked without a
// GPU: kernels register from static initializers whether or not a device is
// present, so the registry tells (tests/cuda/training_step_ops_test.cc,
// tests/cuda_train/trainer_step_ops_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "nimbus/device/backend.h"
#include "nimbus/graph/function.h"
#include "nimbus/ops/registry.h"

namespace nimbus::testing {

// The dtype a node's kernel is chosen by: its dispatch input's, or its output's.
inline DType dispatch_dtype(const graph::Graph& g, const graph::Node& node) {
  return node.op->dispatch_input < 0 || node.inputs.empty()
             ? node.outputs[0].dtype
             : g.spec(node.inputs[static_cast<size_t>(node.op->dispatch_input)]).dtype;
}

// Whether some CUDA kernel of the node's op serves its dispatch dtype and accepts its shapes and dtypes (the
// kernels' own `supports` checks, asked with host tensors of the node's shapes and dtypes). cuDNN's kernels
// ask cuDNN's heuristics, which need a device: here their dtypes decide (tests/cuda/cudnn_problem_test.cc
// checks the problems the CNN step poses; the gpu suite runs them).
inline bool has_cuda_kernel(const graph::Graph& g, const graph::Node& node, DType dispatch) {
  std::vector<Tensor> inputs, outputs;
  for (const graph::ValueRef& input : node.inputs)
    inputs.push_back(Tensor::empty(g.spec(input).shape, g.spec(input).dtype));
  for (const TensorSpec& output : node.outputs) outputs.push_back(Tensor::empty(output.shape, output.dtype));
  KernelContext context{*node.op, node.attrs, inputs, outputs, default_stream_for(Device::cpu())};
  for (const KernelDef& kernel : node.op->kernels(DeviceType::kCUDA, dispatch)) {
    if (kernel.supports == nullptr || kernel.name == "cudnn" || kernel.supports(context)) return true;
  }
  return false;
}

// Every op node of the graph has a CUDA kernel; prints the ops ("op (dtype)"), which docs/cuda.md lists.
inline void expect_every_op_of_the_graph_has_a_cuda_kernel(const std::string& what, const graph::Graph& g,
                                                           size_t at_least) {
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

}  // namespace nimbus::testing
