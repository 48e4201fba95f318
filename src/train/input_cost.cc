#include "nimbus/train/input_cost.h"

#include <time.h>

#include <chrono>
#include <memory>
#include <string>

#include "batch_source.h"
#include "nimbus/base/error.h"
#include "nimbus/train/config.h"
#include "nimbus/train/data_config.h"

namespace nimbus::train {
namespace {

double cpu_seconds(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// CPU seconds per sample of `next` (which returns a batch's samples, 0 at the end) on `clock`, after the
// first batch, over about `seconds` of wall time or to the end of the epoch.
template <typename Next>
double seconds_per_sample(Next next, clockid_t clock, double seconds) {
  if (next() == 0) throw DataError("data.train: no batch to time");
  const auto wall_end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  const double start = cpu_seconds(clock);
  int64_t samples = 0;
  while (std::chrono::steady_clock::now() < wall_end) {
    const int64_t batch = next();
    if (batch == 0) break;
    samples += batch;
  }
  return samples > 0 ? (cpu_seconds(clock) - start) / static_cast<double>(samples) : 0;
}

}  // namespace

InputCost measure_input_cost(const nlohmann::json& config, int64_t batch_size, double seconds) {
  const nlohmann::json& split = config.at("data").at("train");
  const nlohmann::json& runtime = config.at("runtime");
  const uint64_t seed =
      runtime.contains("seed") && !runtime.at("seed").is_null() ? runtime.at("seed").get<uint64_t>() : 0;
  if (is_pipeline_split(split)) {
    data::Iterator batches = dataset_from_config(split, "data.train", batch_size, seed).iterator(seed, 0);
    // The pipeline's own threads do the work: the process's CPU time counts them.
    return {.seconds_per_sample = seconds_per_sample(
                [&]() -> int64_t {
                  const std::optional<data::Element> batch = batches.next();
                  return batch ? (*batch)[0].dim(0) : 0;
                },
                CLOCK_PROCESS_CPUTIME_ID, seconds),
            .in_training_thread = false};
  }
  const auto [x, y] = load_idx_split(split, model_from_train_config(config), "data.train");
  TensorBatches batches(x, y, batch_size, true);
  batches.begin_epoch(1, seed, 0);
  return {.seconds_per_sample = seconds_per_sample(
              [&]() -> int64_t {
                const auto batch = batches.next();
                return batch ? batch->first.dim(0) : 0;
              },
              CLOCK_THREAD_CPUTIME_ID, seconds),
          .in_training_thread = true};
}

}  // namespace nimbus::train
