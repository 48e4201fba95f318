// The train step fit traces (or runs eagerly), as named stages composed by operator():
//
//   the replica's share of the batch
//   -> micro_batch_gradients  forward, loss and backward per micro-batch, summed
//   -> reduce_gradients       the all-reduce over replicas (overlapped with the last backward pass)
//   -> unscale_gradients      with a loss scale: 1 / scale, and whether every gradient is finite
//   -> apply_update           the optimizer's update, skipped on an inf or NaN gradient
//   -> step_outputs           the loss and metric statistics (summed over replicas), then `finite`
//
// Internal to the library: Trainer::make_train_function wraps one in nimbus::function.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "nimbus/autodiff/gradient_tape.h"
#include "nimbus/distribute/all_reduce.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/monitor/step_profiler.h"
#include "nimbus/nn/model.h"
#include "nimbus/train/loss_scale.h"
#include "nimbus/train/losses.h"
#include "nimbus/train/metrics.h"
#include "nimbus/train/optimizers.h"

namespace nimbus::train {

// Every statistic of every metric, in order, for `pred` against `y`; `counts` gets how many each returns.
std::vector<Tensor> metric_statistics(const std::vector<std::shared_ptr<Metric>>& metrics, const Tensor& y,
                                      const Tensor& pred, std::vector<size_t>& counts);

class TrainStep {
 public:
  struct Parts {
    nn::Model model;
    std::shared_ptr<Optimizer> optimizer;
    const Loss* loss = nullptr;
    const std::vector<std::shared_ptr<Metric>>* metrics = nullptr;
    DynamicLossScale* loss_scale = nullptr;  // null: the loss is not scaled
    int64_t accumulation = 1;                // micro-batches per step
    // This process's first replica (the trainer's own model) records its optimizer span and the metrics'
    // statistic counts here; null for the other replicas.
    monitor::StepProfiler* profiler = nullptr;
    std::vector<size_t>* statistic_counts = nullptr;
  };
  explicit TrainStep(Parts parts) : parts_(std::move(parts)) {}

  // (x, y) -> the batch's loss (a weighted sum: the mean over the global batch), the metrics' statistics
  // and, with a loss scale, a bool scalar: whether the update was applied.
  std::vector<Tensor> operator()(const std::vector<Tensor>& in) const;

 private:
  // A replica's micro-batches summed: gradients (scaled, with a loss scale), weighted losses, statistics.
  struct Sums {
    std::vector<Tensor> gradients;
    Tensor loss;
    std::vector<Tensor> statistics;
    std::vector<size_t> statistic_counts;
  };
  // One micro-batch's pass.
  struct Pass {
    Tensor pred, weighted_loss;
    std::vector<Tensor> gradients;
  };

  Sums micro_batch_gradients(const Tensor& x, const Tensor& y, int64_t global_batch, const std::vector<Variable>& vars,
                             distribute::OverlappedAllReduce* overlapped) const;
  Pass forward_backward(const Tensor& x, const Tensor& y, int64_t samples, int64_t global_batch,
                        const std::vector<Variable>& vars, GradientTape::GradientReady ready) const;
  static std::vector<Tensor> reduce_gradients(std::vector<Tensor> gradients, const distribute::ReplicaContext* replica,
                                              std::optional<distribute::OverlappedAllReduce>& overlapped);
  Tensor unscale_gradients(std::vector<Tensor>& gradients) const;
  void apply_update(const std::vector<Tensor>& gradients, const std::vector<Variable>& vars,
                    const Tensor& finite) const;
  static std::vector<Tensor> step_outputs(const Sums& sums, const distribute::ReplicaContext* replica,
                                          const Tensor& finite);

  Parts parts_;
};

}  // namespace nimbus::train
