// The pre-run memory check of a training run, driven by its config: what a
// train step needs at a micro-batch (step_memory.h over the traced step), the
// check of `nimbus train` against the device's capacity, and the choices
// `fit.batch_size: auto` and `fit.gradient_accumulation: auto`.
//
//   nlohmann::json config = train::load_config("examples/fashion_mnist_cnn.yaml");
//   train::StepAnalysis step = train::analyze_train_step(config, 128);
//   step.memory.total();   // bytes on the device (graph::MemoryEstimate)
//   step.cost.flops;       // one step (graph::GraphCost)
//
// analyze_train_step traces the step without running it (no arena, no
// batches allocated): the planner calls it to price a configuration.
//
// A batch fits as step_memory.h says, on the trainer's device (the data set is
// host pipeline memory, device/host_memory.h, and does not count).
// fit.gradient_accumulation: auto keeps fit.batch_size and takes the fewest
// accumulation steps (a divisor of the batch) whose estimate fits within
// kSafetyMargin of that; fit.batch_size: auto takes the largest power of two,
// up to the training set's size, that fits so without accumulation. A fixed
// batch that does not fit is refused with the numbers and the accumulation
// that would fit, or why none would.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>

#include "nimbus/train/assumed_devices.h"
#include "nimbus/train/step_memory.h"
#include "nimbus/train/trainer.h"

namespace nimbus::train {

// The train step of the config's model, optimizer and loss over micro-batches of `micro_batch`
// samples (IDX labels: u8, one per sample), `gradient_accumulation` of them per step.
StepAnalysis analyze_train_step(const nlohmann::json& config, int64_t micro_batch, int64_t gradient_accumulation = 1);
// The same for a compiled trainer; samples are shaped like the rows of x and y.
StepAnalysis analyze_train_step(Trainer& trainer, const Tensor& x, const Tensor& y, int64_t micro_batch,
                                int64_t gradient_accumulation = 1);

// What the pre-run check decided.
struct MemoryDecision {
  int64_t batch_size = 0;  // the global batch
  int64_t gradient_accumulation = 1;
  int64_t replicas = 1;          // GPU replicas in sync, each a micro-batch of its share (1 on CPU devices)
  StepAnalysis step;             // at the chosen micro-batch (one replica's)
  uint64_t available_bytes = 0;  // the memory left for the step
  std::string reason;            // one line: what was chosen and why

  int64_t micro_batch() const { return batch_size / (gradient_accumulation * replicas); }
  // {estimate fields in bytes, total_bytes, available_bytes}: the run summary's "memory".
  nlohmann::json to_json() const;
};

// Resolves fit.batch_size and fit.gradient_accumulation (integers or auto) for training on (x, y),
// prints the choice to `out` when fit.verbose > 0, and throws OutOfMemory, with the numbers and a
// remedy, when a fixed batch does not fit. x and y may be symbolic (a dry run's): only their shapes
// are read. With `assumed` (a dry run for other hardware) the step is measured against one assumed
// GPU's memory instead of the trainer's device. Replicas on GPUs (runtime.strategy's, or assumed) are
// each measured at their share of the global batch, which must split evenly as fit requires
// (check_batch_split); replicas on CPU devices share the host's memory, measured at the whole batch.
MemoryDecision check_memory_before_fit(Trainer& trainer, const Tensor& x, const Tensor& y, const nlohmann::json& config,
                                       std::ostream& out, const AssumedDevices* assumed = nullptr);

// trainer.fit, with one block of `step_bytes` (the checked step's MemoryEstimate::step_bytes(); 0: none)
// reserved on the trainer's device before each epoch, as the check counted the step's allocations
// (reserve_memory), and runtime.memory.trim_between_epochs applied (the step arenas released and the
// device trimmed after each epoch); on OutOfMemory it writes a checkpoint to `checkpoint_path` when it
// can and rethrows with the checkpoint named in the hint.
History fit_saving_on_out_of_memory(Trainer& trainer, const Tensor& x, const Tensor& y, FitOptions options,
                                    const nlohmann::json& config, uint64_t step_bytes,
                                    const std::string& checkpoint_path);
// The same for trainer.fit(dataset).
History fit_saving_on_out_of_memory(Trainer& trainer, const data::Dataset& dataset, FitOptions options,
                                    const nlohmann::json& config, uint64_t step_bytes,
                                    const std::string& checkpoint_path);

}  // namespace nimbus::train
