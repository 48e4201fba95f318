#include "nimbus/train/step_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <ostream>

#include "nimbus/base/error.h"
#include "nimbus/base/size_units.h"
#include "nimbus/device/memory.h"
#include "nimbus/graph/function.h"

namespace nimbus::train {

Tensor placeholder_rows(const Tensor& data, int64_t rows) {
  Shape shape = data.shape();
  shape[0] = rows;
  return Tensor::symbolic(shape, data.dtype(), data.device(), nullptr);
}

StepAnalysis analyze_traced_step(const TracedGraph& traced, int64_t micro_batch, int64_t gradient_accumulation) {
  return {.micro_batch = micro_batch,
          .gradient_accumulation = gradient_accumulation,
          .memory = graph::estimate_memory(traced.optimized, traced.plan),
          .cost = graph::graph_cost(traced.optimized, traced.plan)};
}

bool fits(const StepAnalysis& step, uint64_t available, double margin) {
  return static_cast<double>(step.memory.total()) <= (1 - margin) * static_cast<double>(available);
}

// The largest free block of the regions held counts, not the other free blocks: they are scattered,
// and counting them would let fragmentation turn a fitting estimate into an out-of-memory error.
uint64_t memory_available_for(const StepAnalysis& step, Device device) {
  trim_memory(device);
  const AllocatorStats stats = memory_stats(device);
  const uint64_t capacity = memory_capacity(device);
  const uint64_t room = capacity > stats.bytes_reserved ? capacity - stats.bytes_reserved : 0;
  const uint64_t variables =
      std::min(step.memory.parameter_bytes + step.memory.optimizer_state_bytes, stats.bytes_in_use);
  return room + stats.largest_free_block + variables;
}

std::string needs(const StepAnalysis& step, uint64_t available) {
  return fmt::format("a micro-batch of {} needs {} of {}", step.micro_batch, format_bytes(step.memory.total()),
                     format_bytes(available));
}

std::string memory_capacity_text(Device device) {
  const std::optional<uint64_t> limit = memory_options(device).limit;
  return limit ? fmt::format("runtime.memory.limit {} on {}", format_bytes(*limit), device.to_string())
               : fmt::format("the free memory of {}", device.to_string());
}

OutOfMemory variables_do_not_fit(const OutOfMemory& error, Device device, const std::string& what) {
  return OutOfMemory(fmt::format("{} do not fit in {}: {}", what, memory_capacity_text(device), error.message()),
                     kModelTooLargeRemedy);
}

int64_t inference_micro_batch(int64_t batch, Device device, const std::function<StepAnalysis(int64_t)>& analyze,
                              const std::function<void()>& release_steps, const std::string& what, std::ostream& out) {
  const StepAnalysis whole = analyze(batch);
  uint64_t available = memory_available_for(whole, device);
  if (fits(whole, available, kSafetyMargin)) return batch;
  // The steps' arenas take turns, as fit's training and validation do: what the others hold is left too.
  release_steps();
  available = memory_available_for(whole, device);
  if (fits(whole, available, kSafetyMargin)) return batch;
  const auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  int64_t pieces = 2;
  if (batch > 2) {
    // The estimate grows linearly with the micro-batch: the line through the whole batch and its half.
    const StepAnalysis half = analyze(ceil_div(batch, 2));
    const double per_sample =
        double(whole.memory.total() - half.memory.total()) / double(whole.micro_batch - half.micro_batch);
    const double fixed = double(whole.memory.total()) - per_sample * double(batch);
    const double budget = (1 - kSafetyMargin) * double(available);
    const int64_t predicted = per_sample > 0 ? static_cast<int64_t>((budget - fixed) / per_sample) : 1;
    pieces = ceil_div(batch, std::clamp<int64_t>(predicted, 1, batch - 1));
  }
  StepAnalysis step = analyze(ceil_div(batch, pieces));
  // Fewer pieces where the line was pessimistic, more where it was not.
  while (pieces > 2 && fits(step, available, kSafetyMargin)) {
    StepAnalysis larger = analyze(ceil_div(batch, pieces - 1));
    if (!fits(larger, available, kSafetyMargin)) break;
    step = std::move(larger);
    --pieces;
  }
  while (!fits(step, available, kSafetyMargin)) {
    if (step.micro_batch == 1) {
      throw OutOfMemory(fmt::format("inference: {} ({})", needs(step, available), step.memory.to_string()),
                        "a smaller model, or more memory (runtime.memory.limit)");
    }
    pieces = ceil_div(batch, step.micro_batch - 1);
    step = analyze(ceil_div(batch, pieces));
  }
  out << fmt::format(
      "{}: a batch of {} needs {} of the {} left less a {:.0f}% margin: running {} micro-batches of {} ({})\n", what,
      batch, format_bytes(whole.memory.total()), format_bytes(available), 100 * kSafetyMargin, pieces, step.micro_batch,
      format_bytes(step.memory.total()));
  return step.micro_batch;
}

}  // namespace nimbus::train
