// Memory accounting of one traced step, as the trainer needs it: what the step needs
// (graph/memory_estimate.h over its graph and plan), what the device leaves for it, and the
// micro-batch an evaluate or predict batch runs in so that it fits. It knows nothing of the
// Trainer: the caller traces. The config-driven pre-run check built on it is memory_check.h.
//
//   const StepAnalysis step = analyze_traced_step(trainer.trace_test_step(x, y), 128);
//   fits(step, memory_available_for(step, Device::cpu()));
//
// A step fits when its estimate is at most the memory left for it, less kSafetyMargin: the room
// the device's capacity (memory_capacity: the limit, the preallocated region or the device's free
// memory) leaves for a new region, plus the largest free block of the regions held, plus the
// model's and optimizer's variables (which the estimate counts).
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>

#include "nimbus/base/error.h"
#include "nimbus/device/device.h"
#include "nimbus/graph/cost.h"
#include "nimbus/graph/memory_estimate.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus {
struct TracedGraph;
}  // namespace nimbus

namespace nimbus::train {

// Auto choices leave this share of the memory left free: the estimate's error
// (within 10% on the tested models) and fragmentation.
inline constexpr double kSafetyMargin = 0.1;

struct StepAnalysis {
  int64_t micro_batch = 0;
  int64_t gradient_accumulation = 1;  // micro-batches per step; the step sees micro_batch × this samples
  graph::MemoryEstimate memory;
  graph::GraphCost cost;
};

// A tensor of `rows` samples shaped like `data`'s rows, without memory: tracing reads only shapes.
Tensor placeholder_rows(const Tensor& data, int64_t rows);

// The estimate and cost of a traced step over micro-batches of `micro_batch` samples.
StepAnalysis analyze_traced_step(const TracedGraph& traced, int64_t micro_batch, int64_t gradient_accumulation = 1);

// Whether the step's estimate is within (1 - margin) of `available`.
bool fits(const StepAnalysis& step, uint64_t available, double margin = kSafetyMargin);

// The memory left for the step on `device` (fully free regions are handed back first); the variables
// count once a step is traced.
uint64_t memory_available_for(const StepAnalysis& step, Device device);

// "a micro-batch of 64 needs 1.2 GiB of 1.0 GiB": for messages.
std::string needs(const StepAnalysis& step, uint64_t available);
// What caps the device's memory, for messages: "runtime.memory.limit 96.0 MiB on cpu:0", or "the free
// memory of cuda:0" without a limit.
std::string memory_capacity_text(Device device);

// The remedy when the model's own variables do not fit: no batch size or accumulation changes them.
inline constexpr const char* kModelTooLargeRemedy =
    "a larger runtime.memory.limit, or a smaller model (gradient_accumulation splits the batch, not the model)";
// `error`, the allocator's, raised while `what` ("the model's weights") were made on `device`, as the
// refusal of the run: what does not fit under which limit, and the remedy.
OutOfMemory variables_do_not_fit(const OutOfMemory& error, Device device, const std::string& what);

// The micro-batch evaluate or predict (`what`) runs batches of `batch` samples in, as
// fit.gradient_accumulation: auto picks training's: `batch` when its step fits the memory left on
// `device` within kSafetyMargin, else the largest ceil(batch / k), for the fewest pieces k, that fits
// (a line through two traced sizes predicts it, tracing confirms it). `analyze(micro_batch)` traces the
// step at that micro-batch; `release_steps()` hands the traced steps' arenas back before a second look.
// Says on `out` what it chose when it splits; throws OutOfMemory, with the numbers, when one sample does
// not fit.
int64_t inference_micro_batch(int64_t batch, Device device, const std::function<StepAnalysis(int64_t)>& analyze,
                              const std::function<void()>& release_steps, const std::string& what, std::ostream& out);

}  // namespace nimbus::train
