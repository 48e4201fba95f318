// Memory accounting of a training run before its first step: what a train
// step needs at a micro-batch (graph/memory_estimate.h over the traced step),
// the pre-run check of `nimbus train` against the device's capacity, and the
// choices `fit.batch_size: auto` and `fit.gradient_accumulation: auto`.
//
//   nlohmann::json config = train::load_config("examples/fashion_mnist_cnn.yaml");
//   train::StepAnalysis step = train::analyze_train_step(config, 128);
//   step.memory.total();   // bytes on the device (graph::MemoryEstimate)
//   step.cost.flops;       // one step (graph::GraphCost)
//
// analyze_train_step traces the step without running it (no arena, no
// batches allocated): the planner calls it to price a configuration.
//
// A batch fits when its step's estimate is at most the memory left for it:
// the room the device's capacity (memory_capacity: the limit, the
// preallocated region or the device's free memory) leaves for a new region,
// plus the largest free block of the regions held, plus the model's and
// optimizer's variables (which the estimate counts). On the CPU the data set
// holds part of the capacity. fit.gradient_accumulation: auto
// keeps fit.batch_size and takes the fewest accumulation steps (a divisor of
// the batch) whose estimate fits within kSafetyMargin of that; fit.batch_size:
// auto takes the largest power of two, up to the training set's size, that
// fits so without accumulation. A fixed batch that does not fit is refused
// with the numbers and the accumulation that would fit.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>

#include "nimbus/graph/cost.h"
#include "nimbus/graph/memory_estimate.h"
#include "nimbus/train/trainer.h"

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

// The train step of the config's model, optimizer and loss over micro-batches of `micro_batch`
// samples (IDX labels: u8, one per sample), `gradient_accumulation` of them per step.
StepAnalysis analyze_train_step(const nlohmann::json& config, int64_t micro_batch, int64_t gradient_accumulation = 1);
// The same for a compiled trainer; samples are shaped like the rows of x and y.
StepAnalysis analyze_train_step(Trainer& trainer, const Tensor& x, const Tensor& y, int64_t micro_batch,
                                int64_t gradient_accumulation = 1);

// What the pre-run check decided.
struct MemoryDecision {
  int64_t batch_size = 0;
  int64_t gradient_accumulation = 1;
  StepAnalysis step;             // at the chosen micro-batch
  uint64_t available_bytes = 0;  // the memory left for the step
  std::string reason;            // one line: what was chosen and why

  int64_t micro_batch() const { return batch_size / gradient_accumulation; }
  // {estimate fields in bytes, total_bytes, available_bytes}: the run summary's "memory".
  nlohmann::json to_json() const;
};

// Applies runtime.memory (mode, fraction, limit; NIMBUS_MEMORY_MODE / NIMBUS_MEMORY_LIMIT override) to the CPU.
void configure_memory_from_config(const nlohmann::json& config);

// Resolves fit.batch_size and fit.gradient_accumulation (integers or auto) for training on (x, y),
// prints the choice to `out` when fit.verbose > 0, and throws OutOfMemory, with the numbers and a
// remedy, when a fixed batch does not fit.
MemoryDecision check_memory_before_fit(Trainer& trainer, const Tensor& x, const Tensor& y, const nlohmann::json& config,
                                       std::ostream& out);

// The micro-batch Trainer::evaluate (y defined: its test step) or Trainer::predict (its predict step) runs
// batches of `batch` samples of x in, as fit.gradient_accumulation: auto picks training's: `batch` when
// its step fits the memory left within kSafetyMargin, else the largest ceil(batch / k), for the fewest
// pieces k, that fits (a line through two traced sizes predicts it, tracing confirms it). Says on `out`
// what it chose when it splits; throws OutOfMemory, with the numbers, when one sample does not fit.
int64_t inference_micro_batch(Trainer& trainer, const Tensor& x, const Tensor& y, int64_t batch, std::ostream& out);

// trainer.fit, with runtime.memory.trim_between_epochs applied (the step arenas released and the
// allocator trimmed after each epoch); on OutOfMemory it writes a checkpoint to `checkpoint_path`
// when it can and rethrows with the checkpoint named in the hint.
History fit_saving_on_out_of_memory(Trainer& trainer, const Tensor& x, const Tensor& y, FitOptions options,
                                    const nlohmann::json& config, const std::string& checkpoint_path);
// The same for trainer.fit(dataset); `device` is where the batches go.
History fit_saving_on_out_of_memory(Trainer& trainer, const data::Dataset& dataset, Device device, FitOptions options,
                                    const nlohmann::json& config, const std::string& checkpoint_path);

}  // namespace nimbus::train
