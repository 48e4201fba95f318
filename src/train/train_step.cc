#include "train_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "nimbus/base/error.h"
#include "nimbus/ops/elementwise.h"
#include "rows.h"

namespace nimbus::train {

std::vector<Tensor> metric_statistics(const std::vector<std::shared_ptr<Metric>>& metrics, const Tensor& y,
                                      const Tensor& pred, std::vector<size_t>& counts) {
  std::vector<Tensor> all;
  counts.clear();
  for (const auto& metric : metrics) {
    std::vector<Tensor> statistics = metric->batch_statistics(y, pred);
    counts.push_back(statistics.size());
    for (Tensor& s : statistics) all.push_back(std::move(s));
  }
  return all;
}

namespace {

// Replica r of R takes rows [B r / R, B (r + 1) / R) of the global batch of B; outside a replica, (x, y).
// InvalidArgument when the batch has fewer rows than there are replicas.
std::pair<Tensor, Tensor> replica_share(const Tensor& x, const Tensor& y, const distribute::ReplicaContext* replica) {
  if (replica == nullptr || replica->num_replicas == 1) return {x, y};
  // A GPU replica gets its share uploaded already (replicated_step.cc: replica_input).
  if (!replica->device.is_cpu()) return {x, y};
  const int64_t batch = x.dim(0), replicas = replica->num_replicas, id = replica->replica_id;
  const int64_t begin = batch * id / replicas, end = batch * (id + 1) / replicas;
  if (begin == end) {
    throw InvalidArgument(fmt::format("a batch of {} samples cannot be split over {} replicas", batch, replicas),
                          fmt::format("use a batch_size (and a dataset size) of at least {} per step", replicas));
  }
  return {rows(x, begin, end), rows(y, begin, end)};
}

// Each output of a step (the weighted loss, the metrics' statistics: all sums) summed over the replicas.
std::vector<Tensor> sum_over_replicas(const std::vector<Tensor>& outputs) {
  // The collective carries f32; statistics are counts and sums well inside f32's exact range per step.
  std::vector<Tensor> as_f32;
  as_f32.reserve(outputs.size());
  for (const Tensor& output : outputs) {
    as_f32.push_back(output.dtype() == DType::kF32 ? output : cast(output, DType::kF32));
  }
  std::vector<Tensor> summed = distribute::all_reduce_sum(as_f32);
  for (size_t i = 0; i < summed.size(); ++i) {
    if (outputs[i].dtype() != DType::kF32) summed[i] = cast(summed[i], outputs[i].dtype());
  }
  return summed;
}

// Lengths of `parts` near-equal pieces of `total` (the first ones one longer).
std::vector<int64_t> micro_batch_sizes(int64_t total, int64_t parts) {
  std::vector<int64_t> sizes;
  for (int64_t k = 0; k < parts; ++k) sizes.push_back(total / parts + (k < total % parts ? 1 : 0));
  return sizes;
}

// totals[i] += values[i]; empty totals take the values.
void add_into(std::vector<Tensor>& totals, const std::vector<Tensor>& values) {
  if (totals.empty()) {
    totals = values;
    return;
  }
  for (size_t i = 0; i < values.size(); ++i) totals[i] = totals[i] + values[i];
}

// With a communication thread, each bucket's all-reduce starts during the last micro-batch's backward
// pass, as soon as its gradients (every micro-batch's) are ready; otherwise none (all after the pass).
std::optional<distribute::OverlappedAllReduce> overlapped_all_reduce(const distribute::ReplicaContext* replica,
                                                                     const std::vector<Variable>& vars) {
  if (replica == nullptr || !replica->gradient_thread) return std::nullopt;
  std::vector<Tensor> values;
  values.reserve(vars.size());
  for (const Variable& var : vars) values.push_back(var.value());
  return std::optional<distribute::OverlappedAllReduce>(std::in_place, values, replica->bucket_bytes);
}

}  // namespace

std::vector<Tensor> TrainStep::operator()(const std::vector<Tensor>& in) const {
  const distribute::ReplicaContext* replica = distribute::current_replica();
  // Under a strategy each replica takes its share of the global batch; losses are weighted by the
  // share of the global batch so that the replicas' sum is the global batch's mean.
  const auto [x, y] = replica_share(in[0], in[1], replica);
  const std::vector<Variable> vars = parts_.model.trainable_weights();
  std::optional<distribute::OverlappedAllReduce> overlapped = overlapped_all_reduce(replica, vars);
  Sums sums = micro_batch_gradients(x, y, in[0].dim(0), vars, overlapped ? &*overlapped : nullptr);
  if (parts_.statistic_counts) *parts_.statistic_counts = sums.statistic_counts;
  std::vector<Tensor> gradients = reduce_gradients(std::move(sums.gradients), replica, overlapped);
  const Tensor finite = unscale_gradients(gradients);
  apply_update(gradients, vars, finite);
  return step_outputs(sums, replica, finite);
}

// The replica's batch in `accumulation` micro-batches, each sliced where its pass begins (not split up
// front, so the memory plan holds one at a time). With an overlapped all-reduce, the last micro-batch's
// gradients go to it, added to the earlier ones, as its backward pass makes them.
TrainStep::Sums TrainStep::micro_batch_gradients(const Tensor& x, const Tensor& y, int64_t global_batch,
                                                 const std::vector<Variable>& vars,
                                                 distribute::OverlappedAllReduce* overlapped) const {
  const int64_t batch = x.dim(0);
  const int64_t parts = std::min(parts_.accumulation, batch);
  const std::vector<int64_t> sizes = micro_batch_sizes(batch, parts);
  Sums sums{.gradients = std::vector<Tensor>(vars.size())};
  int64_t begin = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const Tensor xk = parts == 1 ? x : rows(x, begin, begin + sizes[k]);
    const Tensor yk = parts == 1 ? y : rows(y, begin, begin + sizes[k]);
    begin += sizes[k];
    const bool to_all_reduce = overlapped != nullptr && k + 1 == sizes.size();
    GradientTape::GradientReady ready;
    if (to_all_reduce) {
      ready = [&](size_t i, const Tensor& g) {
        overlapped->ready(i, sums.gradients[i].defined() ? sums.gradients[i] + g : g);
      };
    }
    const Pass pass = forward_backward(xk, yk, sizes[k], global_batch, vars, std::move(ready));
    for (size_t i = 0; i < pass.gradients.size() && !to_all_reduce; ++i) {
      const Tensor& g = pass.gradients[i];
      if (g.defined()) sums.gradients[i] = sums.gradients[i].defined() ? sums.gradients[i] + g : g;
    }
    sums.loss = sums.loss.defined() ? sums.loss + pass.weighted_loss : pass.weighted_loss;
    add_into(sums.statistics, metric_statistics(*parts_.metrics, yk, pass.pred, sums.statistic_counts));
  }
  return sums;
}

// Forward, the loss (plus the layers' regularization) weighted by the micro-batch's share of the global
// batch, and the backward pass from it (scaled, with a loss scale); `ready`, when set, sees each gradient.
TrainStep::Pass TrainStep::forward_backward(const Tensor& x, const Tensor& y, int64_t samples, int64_t global_batch,
                                            const std::vector<Variable>& vars,
                                            GradientTape::GradientReady ready) const {
  Pass pass;
  GradientTape tape;
  pass.pred = parts_.model(x, true);
  Tensor loss = (*parts_.loss)(y, pass.pred);
  const Tensor regularization = parts_.model.regularization_loss();
  if (regularization.defined()) loss = loss + cast(regularization, loss.dtype());
  pass.weighted_loss = samples == global_batch ? loss : loss * (double(samples) / double(global_batch));
  if (ready) tape.on_gradient_ready(std::move(ready));
  pass.gradients =
      tape.gradient(parts_.loss_scale ? parts_.loss_scale->scale_loss(pass.weighted_loss) : pass.weighted_loss, vars);
  return pass;
}

// One all-reduce per bucket (started during the last backward pass when overlapped); outside a
// strategy's replica, the gradients as they are.
std::vector<Tensor> TrainStep::reduce_gradients(std::vector<Tensor> gradients,
                                                const distribute::ReplicaContext* replica,
                                                std::optional<distribute::OverlappedAllReduce>& overlapped) {
  if (overlapped) return overlapped->finish();
  if (replica) return distribute::all_reduce_gradients(gradients, replica->bucket_bytes);
  return gradients;
}

// With a loss scale: the gradients unscaled in f32 and whether every one is finite (the all-reduced
// gradients are the same on every replica, so all of them decide alike); without, undefined.
Tensor TrainStep::unscale_gradients(std::vector<Tensor>& gradients) const {
  return parts_.loss_scale ? parts_.loss_scale->unscale(gradients) : Tensor();
}

// The optimizer's update, as the step profiler's optimizer span; with `finite` defined, all or nothing.
void TrainStep::apply_update(const std::vector<Tensor>& gradients, const std::vector<Variable>& vars,
                             const Tensor& finite) const {
  std::optional<monitor::StepProfiler::Scope> span;
  if (parts_.profiler) span.emplace(parts_.profiler, monitor::Span::kOptimizerUpdate);
  const auto update = [&] { parts_.optimizer->apply_gradients(gradients, vars); };
  if (finite.defined()) {
    DynamicLossScale::apply_if_finite(finite, update);
  } else {
    update();
  }
}

// The loss, then the metrics' statistics (all sums, so summed over the replicas), then `finite` when
// defined: last, because accumulate_step reads only the statistics.
std::vector<Tensor> TrainStep::step_outputs(const Sums& sums, const distribute::ReplicaContext* replica,
                                            const Tensor& finite) {
  std::vector<Tensor> outputs = {sums.loss};
  outputs.insert(outputs.end(), sums.statistics.begin(), sums.statistics.end());
  if (replica) outputs = sum_over_replicas(outputs);
  if (finite.defined()) outputs.push_back(finite);
  return outputs;
}

}  // namespace nimbus::train
