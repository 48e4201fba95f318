// RunMonitor: everything that watches one training run. It attaches to the
// trainer's step profiler, keeps the metric registry current (step metrics at
// each step; host and device samplers once per interval on its own thread),
// serves the registry on /metrics when asked, and records the run in its run
// directory: `metrics.jsonl` step lines (spans, memory by tag) and sample
// lines (sampler readings), and `trace.json` (the timeline) at the end.
//
//   monitor::RunMonitor monitor({.metrics_port = 9400, .run_dir = "runs/a"}, std::cerr);
//   monitor.attach(trainer.profiler());
//   trainer.fit(...);
//   monitor.finish();   // last sample, trace.json, then serves --metrics-linger seconds more
//
// metrics.jsonl lines (one JSON object each; "time" is Unix time in seconds):
//   {"type":"step","epoch":1,"step":0,"global_step":0,"time":..,"step_seconds":..,"samples":128,
//    "loss":..,"spans":{"input_wait":..,"host_to_device":..,"compute":..,...},"memory":{"parameters":..,...}}
//   {"type":"sample","time":..,"host":{"cpu_ratio":..,"resident_bytes":..,"memory_total_bytes":..,
//    "memory_available_bytes":..,"cores":..,"threads":{"nimbus-data":..}},"devices":[{"index":0,"sm":..,...}]}
#pragma once

#include <chrono>
#include <functional>
#include <iosfwd>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nimbus/device/device.h"
#include "nimbus/monitor/host_sampler.h"
#include "nimbus/monitor/metric_registry.h"
#include "nimbus/monitor/nvml_sampler.h"
#include "nimbus/monitor/step_profiler.h"

namespace nimbus::monitor {

struct RunMonitorOptions {
  // Serve /metrics on this port (0: any free port) when set.
  std::optional<int> metrics_port{};
  std::string metrics_address = "127.0.0.1";
  // After finish(), keep serving this long so that a last scrape sees the final counters.
  double metrics_linger_seconds = 0;
  // Write metrics.jsonl and trace.json here when set (the directory is created).
  std::optional<std::string> run_dir{};
  // Write the step lines of metrics.jsonl; false where the run directory's own writer
  // (train::MetricsLogger, under nimbus train) writes them with step_line_fields.
  bool step_lines = true;
  // The device whose allocator the memory metrics read.
  Device device = Device::cpu();
  std::chrono::milliseconds sample_interval{1000};
};

// The fields a step line carries besides the run directory's own: "spans" (seconds per span).
nlohmann::json step_span_fields(const StepRecord& step);
// step_span_fields plus "memory": bytes in use on `device` by allocation tag.
nlohmann::json step_line_fields(const StepRecord& step, Device device);
// The run summary's monitoring fields: input_wait_seconds_total (equal to the exporter's
// nimbus_input_wait_seconds_total) and step_span_seconds (seconds per span).
nlohmann::json summary_fields(const StepAggregate& totals);
// Sample readings as a metrics.jsonl line (see the header comment).
nlohmann::json sample_line(double unix_time, const HostReading& host, const std::vector<DeviceReading>& devices);

class RunMonitor {
 public:
  // `log` gets one line when NVML is absent and one naming the exporter's URL.
  RunMonitor(RunMonitorOptions options, std::ostream& log);
  ~RunMonitor();
  RunMonitor(const RunMonitor&) = delete;
  RunMonitor& operator=(const RunMonitor&) = delete;

  // Starts recording `profiler`'s steps (one profiler at a time; it must outlive the monitor or finish()).
  void attach(StepProfiler& profiler);
  // Publishes an input pipeline's stage statistics (a data::Iterator's stats_json, read by
  // `stats`) with every sample, as nimbus_pipeline_* metrics (pipeline_metrics.h).
  void watch_pipeline(std::function<std::string()> stats);
  // Stops sampling (after one last sample), writes trace.json, lingers, stops serving. Idempotent.
  void finish();

  MetricRegistry& registry();
  // The exporter's URL, when serving.
  std::optional<std::string> metrics_url() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace nimbus::monitor
