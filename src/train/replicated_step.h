// The replicas of a strategy with several replicas besides the trainer's own (each
// replica's share of the batch and the sums over replicas are stages of train_step.h).
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

struct Trainer::Replicas {
  // A local replica besides replica 0: a copy of the model and of the optimizer, with its own traced step.
  struct Replica {
    nn::Model model;
    std::shared_ptr<Optimizer> optimizer;
    std::optional<Function> train{};
    std::optional<bool> graph{}, jit{};
    int64_t accumulation = 0;
    bool placed = false;  // a GPU replica's variables are on its GPU
  };
  std::vector<Replica> others;
  // Whether every replica holds replica 0's variables (broadcast before a fit's first step).
  bool synced = false;
};

}  // namespace nimbus::train
