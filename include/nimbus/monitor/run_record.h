// A training run as the monitor recorded it, read back for `nimbus doctor`
// and `nimbus report`: the run directory's metrics.jsonl (step and sample
// lines; other line types are skipped; a torn last line too), summary.json and config.json, or a live exporter.
//
//   monitor::RunRecord run = monitor::read_run_dir("runs/2026-11-30T15-00");
//   run.steps.size();  run.samples.front().host_cpu_ratio;
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nimbus/monitor/step_profiler.h"

namespace nimbus::monitor {

struct StepLine {
  int epoch = 0;
  int64_t step = 0;
  double time = 0;  // Unix seconds at the step's end
  double step_seconds = 0;
  int64_t samples = 0;
  double loss = 0;                             // the epoch's running mean, as Keras logs it
  std::optional<double> batch_loss;            // this step's batch alone; absent in older lines
  std::optional<SpanSeconds> spans;            // absent in lines written without the profiler
  std::map<std::string, double> memory_bytes;  // by kind; empty when not recorded
  std::optional<double> loss_scale;            // mixed precision, when recorded
  std::optional<int> worker;                   // distributed runs, when recorded
};

struct DeviceSample {
  int index = 0;
  std::optional<double> sm_util_percent, memory_used_bytes, memory_total_bytes;
};

struct SampleLine {
  double time = 0;
  double host_cpu_ratio = 0;
  int cores = 0;
  std::map<std::string, double> thread_cpu_ratio;  // by thread name
  std::vector<DeviceSample> devices;
};

// clang-tidy flags the implicit special members of a struct holding nlohmann::json, whose moves are noexcept.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct RunRecord {
  std::string source;  // the directory or URL read
  std::vector<StepLine> steps;
  std::vector<SampleLine> samples;
  nlohmann::json summary;             // null when there is none
  nlohmann::json config;              // the training config as run; null when there is none
  std::vector<std::string> warnings;  // what the reader skipped: a torn last line of metrics.jsonl
};

// Reads DIR/metrics.jsonl (required), DIR/summary.json and DIR/config.json (optional). Throws NotFound
// when the directory has no metrics.jsonl, DataError naming the file and line of a malformed line; a
// torn last line (a killed writer's) is skipped, with a warning in `warnings` (json_lines.h).
RunRecord read_run_dir(const std::string& directory);

// One scrape of a live exporter as a record: one step line holding the run's totals so far
// (spans, samples, mean step time) and one sample line (host and devices).
RunRecord read_exporter(const std::string& url);

}  // namespace nimbus::monitor
