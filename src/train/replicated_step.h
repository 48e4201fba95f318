// The train step under a strategy with several replicas: each replica's share of
// the batch, the sums over replicas, and the replicas other than the trainer's own.
// Internal to the library.
#pragma once

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "nimbus/distribute/strategy.h"
#include "nimbus/graph/function.h"
#include "nimbus/train/trainer.h"

namespace nimbus::train {

// Replica r of R takes rows [B r / R, B (r + 1) / R) of the global batch of B; outside a replica, (x, y).
// InvalidArgument when the batch has fewer rows than there are replicas.
std::pair<Tensor, Tensor> replica_share(const Tensor& x, const Tensor& y, const distribute::ReplicaContext* replica);
// Each output of a step (the weighted loss, the metrics' statistics: all sums) summed over the replicas.
std::vector<Tensor> sum_over_replicas(const std::vector<Tensor>& outputs);

struct Trainer::Replicas {
  // A local replica besides replica 0: a copy of the model and of the optimizer, with its own traced step.
  struct Replica {
    nn::Model model;
    std::shared_ptr<Optimizer> optimizer;
    std::optional<Function> train{};
    std::optional<bool> graph{}, jit{};
    int64_t accumulation = 0;
  };
  std::vector<Replica> others;
  // Whether every replica holds replica 0's variables (broadcast before a fit's first step).
  bool synced = false;
};

}  // namespace nimbus::train
