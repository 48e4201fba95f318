// Shared by the tests that check a traced step's ops against the CUDA kernels in the registry.
#pragma once

#include "nimbus/graph/graph.h"

namespace nimbus::cuda {

// The dtype a node's kernel is chosen by: its dispatch input's, or its output's.
inline DType dispatch_dtype(const graph::Graph& g, const graph::Node& node) {
  return node.op->dispatch_input < 0 || node.inputs.empty()
             ? node.outputs[0].dtype
             : g.spec(node.inputs[static_cast<size_t>(node.op->dispatch_input)]).dtype;
}

}  // namespace nimbus::cuda
