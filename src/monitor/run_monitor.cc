#include "nimbus/monitor/run_monitor.h"

#include <fmt/format.h>

#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <ostream>
#include <thread>

#include "nimbus/base/error.h"
#include "nimbus/device/memory.h"
#include "nimbus/monitor/exporter.h"
#include "nimbus/monitor/host_sampler.h"
#include "nimbus/monitor/nvml_sampler.h"
#include "nimbus/monitor/pipeline_metrics.h"
#include "nimbus/monitor/system_metrics.h"
#include "nimbus/monitor/trace.h"
#include "nimbus/monitor/training_metrics.h"

namespace nimbus::monitor {

namespace {

nlohmann::json spans_json(const SpanSeconds& spans) {
  nlohmann::json json = nlohmann::json::object();
  for (size_t i = 0; i < kNumSpans; ++i) json[std::string(span_name(static_cast<Span>(i)))] = spans.seconds[i];
  return json;
}

}  // namespace

nlohmann::json step_span_fields(const StepRecord& step) { return {{"spans", spans_json(step.spans)}}; }

nlohmann::json step_line_fields(const StepRecord& step, Device device) {
  nlohmann::json fields = step_span_fields(step);
  const AllocatorStats stats = memory_stats(device);
  nlohmann::json memory = nlohmann::json::object();
  for (size_t i = 0; i < kNumMemoryTags; ++i) memory[memory_kind_label(MemoryTag(i))] = stats.by_tag[i].bytes_in_use;
  fields["memory"] = memory;
  if (step.loss_scale) {
    fields["loss_scale"] = *step.loss_scale;
    fields["skipped_steps"] = step.skipped_steps;
  }
  return fields;
}

nlohmann::json summary_fields(const StepAggregate& totals) {
  return {{"input_wait_seconds_total", totals.spans[Span::kInputWait]},
          {"step_span_seconds", spans_json(totals.spans)}};
}

nlohmann::json sample_line(double unix_time, const HostReading& host, const std::vector<DeviceReading>& devices) {
  nlohmann::json threads = nlohmann::json::object();
  for (const auto& [name, ratio] : host.thread_cpu_ratio) threads[name] = ratio;
  nlohmann::json line = {{"type", "sample"},
                         {"time", unix_time},
                         {"host",
                          {{"cpu_ratio", host.process_cpu_ratio},
                           {"resident_bytes", host.resident_bytes},
                           {"memory_total_bytes", host.system_memory_total_bytes},
                           {"memory_available_bytes", host.system_memory_available_bytes},
                           {"cores", host.cores},
                           {"threads", threads}}},
                         {"devices", nlohmann::json::array()}};
  // NaN (unsupported) becomes null in JSON.
  auto value = [](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
  for (const DeviceReading& d : devices) {
    line["devices"].push_back({{"index", d.index},
                               {"name", d.name},
                               {"sm_util_percent", value(d.sm_util_percent)},
                               {"mem_util_percent", value(d.mem_util_percent)},
                               {"memory_used_bytes", value(d.memory_used_bytes)},
                               {"memory_total_bytes", value(d.memory_total_bytes)},
                               {"power_watts", value(d.power_watts)},
                               {"gpu_temp_celsius", value(d.gpu_temp_celsius)}});
  }
  return line;
}

namespace {

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

}  // namespace

struct RunMonitor::State {
  RunMonitorOptions options;
  std::ostream& log;
  MetricRegistry registry;
  TrainingMetrics training{registry, options.device};
  SystemMetrics system{registry};
  HostSampler host;
  NvmlSampler nvml;
  std::unique_ptr<MetricsExporter> exporter;

  std::mutex log_mutex;  // guards metrics_jsonl (the training and sampler threads both write)
  std::ofstream metrics_jsonl;

  std::mutex pipeline_mutex;  // guards pipeline_stats (set by the training thread, read by the sampler)
  std::function<std::string()> pipeline_stats;

  StepProfiler* profiler = nullptr;
  int observer_id = -1;
  double unix_minus_steady = 0;  // Unix time of the profiler's origin

  std::mutex sampler_mutex;
  std::condition_variable sampler_wake;
  bool stopping = false;
  std::thread sampler;
  bool finished = false;

  State(RunMonitorOptions opts, std::ostream& out) : options(std::move(opts)), log(out) {}

  void write_line(const nlohmann::json& line) {
    if (!metrics_jsonl.is_open()) return;
    std::lock_guard lock(log_mutex);
    metrics_jsonl << line.dump() << "\n";
  }

  void sample_once() {
    const HostReading host_reading = host.sample();
    const std::vector<DeviceReading> devices = nvml.sample();
    system.publish(host_reading, devices);
    {
      std::lock_guard lock(pipeline_mutex);
      if (pipeline_stats) publish_pipeline_stats(registry, pipeline_stats());
    }
    training.update_memory();
    write_line(sample_line(unix_now(), host_reading, devices));
    std::lock_guard lock(log_mutex);
    if (metrics_jsonl.is_open()) metrics_jsonl.flush();
  }

  void sample_loop() {
    std::unique_lock lock(sampler_mutex);
    while (!stopping) {
      if (sampler_wake.wait_for(lock, options.sample_interval, [this] { return stopping; })) break;
      lock.unlock();
      sample_once();
      lock.lock();
    }
  }

  void on_step(const StepRecord& step) {
    training.on_step(step);
    if (!metrics_jsonl.is_open() || !options.step_lines) return;
    nlohmann::json line = {{"type", "step"},
                           {"epoch", step.epoch},
                           {"step", step.step},
                           {"global_step", step.global_step},
                           {"time", unix_minus_steady + double(step.end_ns) * 1e-9},
                           {"step_seconds", step.seconds()},
                           {"samples", step.samples},
                           {"loss", step.loss}};
    line.update(step_line_fields(step, options.device));
    write_line(line);
  }
};

RunMonitor::RunMonitor(RunMonitorOptions options, std::ostream& log)
    : state_(std::make_unique<State>(std::move(options), log)) {
  State& s = *state_;
  if (!s.nvml.available()) s.log << "nimbus monitor: " << s.nvml.unavailable_reason() << "\n";
  if (s.options.run_dir) {
    std::filesystem::create_directories(*s.options.run_dir);
    const std::string path = *s.options.run_dir + "/metrics.jsonl";
    s.metrics_jsonl.open(path, std::ios::app);
    if (!s.metrics_jsonl) throw NotFound(fmt::format("{}: cannot write the run's metrics", path));
  }
  if (s.options.metrics_port) {
    s.exporter = std::make_unique<MetricsExporter>(s.registry, s.options.metrics_address, *s.options.metrics_port);
    s.log << "nimbus monitor: serving metrics on " << s.exporter->url() << "\n";
  }
  s.sample_once();
  s.sampler = std::thread([&s] { s.sample_loop(); });
}

RunMonitor::~RunMonitor() {
  // Without finish() (an exception unwinding fit): stop at once, no linger, and report
  // rather than throw a failure to write the trace.
  state_->options.metrics_linger_seconds = 0;
  try {
    finish();
  } catch (const std::exception& error) {
    state_->log << "nimbus monitor: " << error.what() << "\n";
  }
}

void RunMonitor::attach(StepProfiler& profiler) {
  State& s = *state_;
  NIMBUS_ASSERT(s.profiler == nullptr) << "RunMonitor records one profiler";
  s.profiler = &profiler;
  const double steady_now = double(profiler.nanoseconds_since_origin(StepProfiler::Clock::now())) * 1e-9;
  s.unix_minus_steady = unix_now() - steady_now;
  s.observer_id = profiler.add_observer([&s](const StepRecord& step) { s.on_step(step); });
}

void RunMonitor::watch_pipeline(std::function<std::string()> stats) {
  std::lock_guard lock(state_->pipeline_mutex);
  state_->pipeline_stats = std::move(stats);
}

void RunMonitor::finish() {
  State& s = *state_;
  if (s.finished) return;
  s.finished = true;
  {
    std::lock_guard lock(s.sampler_mutex);
    s.stopping = true;
  }
  s.sampler_wake.notify_all();
  s.sampler.join();
  s.sample_once();
  {
    std::lock_guard lock(s.pipeline_mutex);
    s.pipeline_stats = nullptr;  // the iterator may end with training
  }
  if (s.profiler != nullptr) {
    s.profiler->remove_observer(s.observer_id);
    if (s.options.run_dir) write_chrome_trace(s.profiler->recent_steps(), *s.options.run_dir + "/trace.json");
    s.profiler = nullptr;
  }
  if (s.exporter && s.options.metrics_linger_seconds > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(s.options.metrics_linger_seconds));
  }
  s.exporter.reset();
  if (s.metrics_jsonl.is_open()) s.metrics_jsonl.close();
}

MetricRegistry& RunMonitor::registry() { return state_->registry; }

std::optional<std::string> RunMonitor::metrics_url() const {
  if (!state_->exporter) return std::nullopt;
  return state_->exporter->url();
}

}  // namespace nimbus::monitor
