#include "nimbus/monitor/run_record.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "nimbus/base/error.h"
#include "nimbus/monitor/dmon.h"
#include "nimbus/monitor/exporter.h"
#include "nimbus/monitor/json_lines.h"
#include "nimbus/monitor/prometheus_text.h"

namespace nimbus::monitor {

namespace {

std::optional<double> optional_number(const nlohmann::json& object, const char* key) {
  if (!object.contains(key) || !object[key].is_number()) return std::nullopt;
  return object[key].get<double>();
}

StepLine step_from_json(const nlohmann::json& line) {
  StepLine step;
  step.epoch = line.value("epoch", 0);
  step.step = line.value("step", int64_t{0});
  step.time = line.value("time", 0.0);
  step.step_seconds = line.value("step_seconds", 0.0);
  step.samples = line.value("samples", int64_t{0});
  step.loss = line.value("loss", 0.0);
  step.batch_loss = optional_number(line, "batch_loss");
  if (line.contains("spans")) {
    SpanSeconds spans;
    for (size_t i = 0; i < kNumSpans; ++i) {
      spans.seconds[i] = line["spans"].value(std::string(span_name(static_cast<Span>(i))), 0.0);
    }
    step.spans = spans;
  }
  if (line.contains("memory")) {
    for (const auto& [kind, bytes] : line["memory"].items()) step.memory_bytes[kind] = bytes.get<double>();
  }
  step.loss_scale = optional_number(line, "loss_scale");
  if (line.contains("worker")) step.worker = line["worker"].get<int>();
  return step;
}

SampleLine sample_from_json(const nlohmann::json& line) {
  SampleLine sample;
  sample.time = line.value("time", 0.0);
  const nlohmann::json host = line.value("host", nlohmann::json::object());
  sample.host_cpu_ratio = host.value("cpu_ratio", 0.0);
  sample.cores = host.value("cores", 0);
  const nlohmann::json threads = host.value("threads", nlohmann::json::object());  // kept alive for items()
  for (const auto& [name, ratio] : threads.items()) {
    sample.thread_cpu_ratio[name] = ratio.get<double>();
  }
  const nlohmann::json devices = line.value("devices", nlohmann::json::array());
  for (const auto& device : devices) {
    sample.devices.push_back({.index = device.value("index", 0),
                              .sm_util_percent = optional_number(device, "sm_util_percent"),
                              .memory_used_bytes = optional_number(device, "memory_used_bytes"),
                              .memory_total_bytes = optional_number(device, "memory_total_bytes")});
  }
  return sample;
}

// The file's JSON, or null when there is no such file.
nlohmann::json read_optional_json(const std::string& path) {
  if (!std::filesystem::exists(path)) return nullptr;
  try {
    return nlohmann::json::parse(std::ifstream(path));
  } catch (const nlohmann::json::exception& error) {
    throw DataError(fmt::format("{}: malformed JSON ({})", path, error.what()));
  }
}

}  // namespace

RunRecord read_run_dir(const std::string& directory) {
  RunRecord run;
  run.source = directory;
  const std::string path = directory + "/metrics.jsonl";
  if (!std::filesystem::is_regular_file(path)) {
    throw NotFound(fmt::format("{}: no metrics.jsonl (not a run directory?)", directory),
                   "give the --run-dir of a `nimbus train` run");
  }
  const JsonLines log = read_run_log(path);
  if (log.torn_last_line) run.warnings.push_back(*log.torn_last_line);
  for (const nlohmann::ordered_json& object : log.objects) {
    const nlohmann::json line(object);
    const std::string type = line.value("type", "");
    if (type == "step") run.steps.push_back(step_from_json(line));
    if (type == "sample") run.samples.push_back(sample_from_json(line));
  }
  run.summary = read_optional_json(directory + "/summary.json");
  run.config = read_optional_json(directory + "/config.json");
  return run;
}

RunRecord read_exporter(const std::string& url) {
  RunRecord run;
  run.source = url;
  const std::string text = http_get(url);
  const std::vector<ParsedSample> samples = parse_prometheus_text(text);
  auto value = [&](const std::string& name, const std::string& span = {}) {
    double sum = 0;
    for (const ParsedSample& s : samples) {
      if (s.name == name && (span.empty() || s.label("span") == span)) sum += s.value;
    }
    return sum;
  };
  StepLine totals;
  totals.step_seconds = value("nimbus_step_seconds_sum");
  totals.samples = static_cast<int64_t>(value("nimbus_samples_total"));
  SpanSeconds spans;
  for (size_t i = 0; i < kNumSpans; ++i) {
    spans.seconds[i] = value("nimbus_step_span_seconds_total", std::string(span_name(static_cast<Span>(i))));
  }
  totals.spans = spans;
  if (value("nimbus_step_seconds_count") > 0) run.steps.push_back(totals);
  SampleLine sample;
  sample.host_cpu_ratio = value("nimbus_host_process_cpu_ratio");
  sample.cores = static_cast<int>(value("nimbus_host_cores"));
  for (const ParsedSample& s : samples) {
    if (s.name == "nimbus_host_thread_cpu_ratio") sample.thread_cpu_ratio[s.label("thread")] = s.value;
  }
  auto known = [](double v) { return std::isnan(v) ? std::nullopt : std::optional<double>(v); };
  for (const DeviceReading& d : read_scrape(text, {}, 0).devices) {
    sample.devices.push_back({.index = d.index,
                              .sm_util_percent = known(d.sm_util_percent),
                              .memory_used_bytes = known(d.memory_used_bytes),
                              .memory_total_bytes = known(d.memory_total_bytes)});
  }
  run.samples.push_back(sample);
  return run;
}

}  // namespace nimbus::monitor
