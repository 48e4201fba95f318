// Cost introspection of a graph: per node the floating-point operations and
// the bytes read and written (by dtype), and for the whole graph the arena
// (peak memory of intermediates from the memory plan) and the bytes of
// parameters, their gradients and other state. The memory accounting and the
// planner build on these figures.
//
//   const TracedGraph& traced = step.traced_for(inputs);
//   GraphCost cost = graph_cost(traced.optimized, traced.plan);
//   cost.flops;            // one run of the step
//   cost.parameter_bytes;  // trainable variables the step reads
//
// FLOPs count a multiply-add as two: matmul 2 m n k, convolutions 2 per
// filter tap per output element (their two gradients the same as the
// forward), a fused elementwise node one per instruction per element, other
// ops one per element of their largest operand. Views (reshape, identity)
// move no data and cost nothing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nimbus/graph/graph.h"
#include "nimbus/graph/memory_plan.h"

namespace nimbus::graph {

struct NodeCost {
  double flops = 0;
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  std::string op;     // the op that runs (empty for non-op nodes and views): how the planner tells matmuls apart
  std::string key{};  // op_cost_key (ops/op_profile.h): what the planner's calibration measured it as
};

struct GraphCost {
  std::vector<NodeCost> nodes;  // indexed like graph.nodes(); zero for non-op nodes
  double flops = 0;
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  std::map<DType, uint64_t> bytes_by_dtype;  // read + written, per dtype of the tensor moved
  int kernels = 0;                           // op nodes that run a kernel (views excluded)
  uint64_t arena_bytes = 0;                  // peak memory of intermediates (the memory plan's arena)
  uint64_t parameter_bytes = 0;              // trainable variables the graph reads
  uint64_t gradient_bytes = 0;               // one gradient per trainable variable the graph updates
  uint64_t state_bytes = 0;                  // other captured variables (optimizer slots, statistics)
  uint64_t input_bytes = 0;                  // the function's arguments
  uint64_t output_bytes = 0;                 // the function's results

  // A short human-readable summary ("3.21 GFLOP, 41.2 MiB moved, ...").
  std::string to_string() const;
};

NodeCost node_cost(const Graph& graph, int node);
GraphCost graph_cost(const Graph& graph, const MemoryPlan& plan);

}  // namespace nimbus::graph
