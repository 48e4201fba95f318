// The executor runs an optimized graph: nodes in order, each op's kernel
// chosen once, intermediates in one arena laid out by the memory plan, random
// ops claiming fresh numbers from their generators on every run.
//
// The arena is allocated on the first run (so tracing a step to account for
// its memory allocates nothing) and kept for the next runs until
// release_arena() hands it back to the device's allocator (the trainer does
// between training and evaluation, so their arenas do not add up).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "nimbus/graph/graph.h"
#include "nimbus/graph/memory_plan.h"

namespace nimbus::graph {

class Executor {
 public:
  // Throws Unimplemented when `device` has no kernel for a node's op and dtypes (check_supported).
  Executor(Graph graph, MemoryPlan plan, Device device);

  // Arguments must match the graph's argument specs (the caller checks).
  std::vector<Tensor> run(std::span<const Tensor> arguments);

  const Graph& graph() const { return graph_; }
  const MemoryPlan& plan() const { return plan_; }
  // Frees the arena; the next run allocates it again.
  void release_arena();

 private:
  Graph graph_;
  MemoryPlan plan_;
  Device device_;
  void allocate_arena();

  std::shared_ptr<Storage> arena_;
  // Views of the arena for arena-planned values, made with it: [node][output].
  std::vector<std::vector<Tensor>> arena_views_;
  // The kernel each op node runs, chosen on the first run.
  std::vector<const KernelDef*> kernels_;
};

}  // namespace nimbus::graph
