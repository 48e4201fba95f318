// How a train step runs under a strategy with several replicas in sync: every
// local replica runs its traced step on its own thread (Strategy::run); the step
// takes the replica's share of the global batch, all-reduces the gradients and
// sums the loss and metric statistics, so every replica applies the same update
// and reports the global batch's logs.
#include "replicated_step.h"

#include <fmt/format.h>

#include "nimbus/base/error.h"
#include "nimbus/distribute/all_reduce.h"
#include "rows.h"

namespace nimbus::train {

namespace {

// Replica 0's variables (weights, optimizer step, rate and slots) onto every replica.
void sync_with_replica_0(const nn::Model& model, const Optimizer& optimizer) {
  std::vector<Tensor> values;
  for (const Variable& variable : model.weights()) values.push_back(variable.value());
  for (const Variable& variable : optimizer.variables()) values.push_back(variable.value());
  distribute::broadcast_from_replica_0(values);
}

// A GPU replica's model and optimizer state live on its GPU (a CPU replica's stay in host memory,
// which logical CPU devices share). Before the replica's first trace, as Trainer::place_on_device.
void place_replica_on(Device device, nn::Model& model, Optimizer& optimizer) {
  for (Variable& variable : model.weights()) variable.place_on(device);
  optimizer.build(model.trainable_weights());
  for (Variable& variable : optimizer.variables()) variable.place_on(device);
}

// A GPU replica's share of the global batch (the host's), uploaded to its GPU; on CPU devices the
// traced step takes its share itself (train_step.cc: replica_share).
std::pair<Tensor, Tensor> replica_input(const Tensor& x, const Tensor& y) {
  const distribute::ReplicaContext& replica = *distribute::current_replica();
  if (replica.device.is_cpu()) return {x, y};
  const int64_t batch = x.dim(0), replicas = replica.num_replicas, id = replica.replica_id;
  const int64_t begin = batch * id / replicas, end = batch * (id + 1) / replicas;
  return {rows(x, begin, end).to(replica.device), rows(y, begin, end).to(replica.device)};
}

}  // namespace

std::vector<Tensor> Trainer::run_replicated_train_step(const Tensor& x, const Tensor& y, int64_t accumulation,
                                                       std::optional<bool> graph, std::optional<bool> jit) {
  distribute::Strategy& strategy = *options_.strategy;
  if (!replicas_) replicas_ = std::make_unique<Replicas>();
  Replicas& replicas = *replicas_;
  while (static_cast<int>(replicas.others.size()) + 1 < strategy.local_replicas()) {
    replicas.others.push_back(
        {.model = nn::model_from_config(model_.to_config()), .optimizer = options_.optimizer->clone()});
  }
  // A rate set on the trainer's optimizer (ReduceLROnPlateau) reaches every replica's.
  std::optional<double> learning_rate;
  if (replicas.synced) learning_rate = options_.optimizer->current_learning_rate();
  std::vector<Tensor> outputs;
  const std::string step_name = fmt::format("step {}", position_.global_step + 1);  // for timeout messages
  strategy.run([&](int local) {
    distribute::current_replica()->collectives->set_context(step_name);
    Function* step = nullptr;
    nn::Model model = model_;
    std::shared_ptr<Optimizer> optimizer = options_.optimizer;
    if (local == 0) {
      step = &train_step(x, y, accumulation, graph, jit);  // places the trainer's model on device()
    } else {
      Replicas::Replica& replica = replicas.others[static_cast<size_t>(local - 1)];
      model = replica.model;
      optimizer = replica.optimizer;
      if (!model.built()) (void)model(rows(x, 0, 1), false);
      const Device device = distribute::current_replica()->device;
      if (!device.is_cpu() && !replica.placed) {
        place_replica_on(device, model, *optimizer);
        replica.placed = true;
      }
      optimizer->build(model.trainable_weights());
      if (!replica.train || replica.graph != graph || replica.jit != jit || replica.accumulation != accumulation) {
        replica.train.emplace(make_train_function(model, optimizer, accumulation, false, graph, jit, x, y));
        replica.graph = graph;
        replica.jit = jit;
        replica.accumulation = accumulation;
      }
      step = &*replica.train;
    }
    if (!replicas.synced) {
      sync_with_replica_0(model, *optimizer);
    } else if (local != 0 && optimizer->current_learning_rate() != *learning_rate) {
      optimizer->set_learning_rate(*learning_rate);
    }
    const auto [replica_x, replica_y] = replica_input(x, y);
    std::vector<Tensor> replica_outputs = (*step)({replica_x, replica_y});
    if (local == 0) outputs = std::move(replica_outputs);
  });
  replicas.synced = true;
  return outputs;
}

}  // namespace nimbus::train
