// The workload (workload.h) of a `nimbus train` config: its train step traced at two micro-batches
// (train::analyze_train_step, the memory accounting's own tracing), each node's FLOPs and bytes from
// the graph's cost and the memory from the accounting: the planner prices the same graph the trainer runs.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "nimbus/plan/workload.h"

namespace nimbus::plan {

// `jit`: with elementwise fusion (runtime.jit) or without, for what fusion is worth.
Workload workload_from_config(const nlohmann::json& config, bool jit);

// What producing the config's training samples costs this machine's host (train::measure_input_cost at
// the config's batch size, or 128 for `auto`).
InputWork input_work_from_config(const nlohmann::json& config);

// The samples of the config's training set (data.train).
int64_t training_samples(const nlohmann::json& config);

// Where an op of a traced step runs: matmuls and convolutions on the matrix units, the rest on vector units.
Unit kernel_unit(const std::string& op);

}  // namespace nimbus::plan
