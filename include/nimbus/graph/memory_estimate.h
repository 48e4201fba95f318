// Memory accounting before a run: how much device memory one traced step
// needs, from its graph and memory plan, without running it. The trainer's
// pre-run check (`nimbus train`, train/memory_check.h) and the planner call
// this one function.
//
//   const TracedGraph& traced = step.traced_for(inputs);
//   MemoryEstimate memory = estimate_memory(traced.optimized, traced.plan);
//   memory.total();        // bytes the step needs on its device
//   memory.to_string();    // "parameters 1.6 MiB + gradients ... = 9.4 MiB"
//
// The formula (docs/memory.md):
//   total = parameters + optimizer state + master weights
//         + arena (gradients, activations and temporaries of the step, laid
//           out by the memory plan; the gradients are shown apart)
//         + workspace (kernels' scratch outside the plan)
//         + inputs (the batch on the device) + outputs (fresh each run)
//         + framework reserve (what the device holds outside the allocator)
// Every figure but the reserve is served by the device's allocator, so
// total() − framework_reserve_bytes is the peak the allocator's statistics
// show while the step runs (tests/memory_accounting/accounting_test.cc holds it to 10%).
#pragma once

#include <cstdint>
#include <string>

#include "nimbus/graph/graph.h"
#include "nimbus/graph/memory_plan.h"

namespace nimbus::graph {

struct MemoryEstimateOptions {
  // Mixed precision keeps an f32 master copy of every parameter (4 bytes per
  // element) besides the low-precision one the step reads. Off for f32 steps.
  bool master_weights = false;
  // Device memory the framework holds outside its allocator (a CUDA context,
  // library handles); 0 on the CPU.
  uint64_t framework_reserve_bytes = 0;
  // Compute threads, each with its own kernel scratch; 0: this process's (compute_threads()).
  int threads = 0;
};

struct MemoryEstimate {
  uint64_t parameter_bytes = 0;        // trainable variables
  uint64_t gradient_bytes = 0;         // one per updated variable (they live in the arena while the step runs)
  uint64_t optimizer_state_bytes = 0;  // optimizer slots and step counter, other non-trainable variables
  uint64_t master_weight_bytes = 0;    // f32 copies under mixed precision
  uint64_t activation_bytes = 0;       // the arena less the gradients: activations and temporaries
  uint64_t workspace_bytes = 0;        // kernels' scratch outside the plan (the fused kernels', per thread)
  uint64_t input_bytes = 0;            // the step's arguments (the batch)
  uint64_t output_bytes = 0;           // the step's results (loss, metric statistics)
  uint64_t framework_reserve_bytes = 0;

  uint64_t total() const;
  // What the step allocates while it runs: the arena, the workspace, the inputs and the outputs (the
  // total less the variables and the framework's reserve).
  uint64_t step_bytes() const;
  // "parameters 1.6 MiB + gradients 1.6 MiB + ... = 9.4 MiB" (the zero terms left out).
  std::string to_string() const;
};

MemoryEstimate estimate_memory(const Graph& graph, const MemoryPlan& plan, const MemoryEstimateOptions& options = {});

}  // namespace nimbus::graph
