// What producing a config's training batches costs the host, measured as `nimbus train` produces them:
// the planner's input term (plan/step_model.h).
//
//   train::InputCost input = train::measure_input_cost(config, 128);
//   input.seconds_per_sample;   // host CPU seconds per training sample, every thread counted
//
// With the IDX shorthand the training thread gathers each batch's rows from tensors in memory before
// the step runs (in_training_thread); a pipeline (`data.train.source`) decodes, maps and batches on its
// own threads beside training. Batches are drawn for about `seconds` of wall time after the first (which
// pays the start-up: threads, files, buffers); a pipeline's `cache` is met in its first epoch, so
// a cached pipeline's later epochs cost less than this says.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

namespace nimbus::train {

struct InputCost {
  double seconds_per_sample = 0;
  bool in_training_thread = false;
};

InputCost measure_input_cost(const nlohmann::json& config, int64_t batch_size, double seconds = 0.3);

}  // namespace nimbus::train
