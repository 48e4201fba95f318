// The executor runs an optimized graph: nodes in order, each op's kernel
// chosen once, intermediates in one arena laid out by the memory plan, random
// ops claiming fresh numbers from their generators on every run.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "nimbus/graph/graph.h"
#include "nimbus/graph/memory_plan.h"

namespace nimbus::graph {

class Executor {
 public:
  Executor(Graph graph, MemoryPlan plan, Device device);

  // Arguments must match the graph's argument specs (the caller checks).
  std::vector<Tensor> run(std::span<const Tensor> arguments);

  const Graph& graph() const { return graph_; }
  const MemoryPlan& plan() const { return plan_; }

 private:
  Graph graph_;
  MemoryPlan plan_;
  Device device_;
  std::shared_ptr<Storage> arena_;
  // Views of the arena for arena-planned values, made once: [node][output].
  std::vector<std::vector<Tensor>> arena_views_;
  // The kernel each op node runs, chosen on the first run.
  std::vector<const KernelDef*> kernels_;
};

}  // namespace nimbus::graph
