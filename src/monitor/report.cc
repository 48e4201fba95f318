#include "nimbus/monitor/report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "nimbus/monitor/doctor.h"
#include "nimbus/monitor/svg_chart.h"

namespace nimbus::monitor {

namespace {

// Figures as a reader wants them: grouped digits, a few significant ones, and their unit.

std::string grouped(double value) {
  const std::string digits = fmt::format("{:.0f}", std::abs(value));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string duration_text(double seconds) {
  if (seconds < 1) return fmt::format("{:.0f} ms", seconds * 1e3);
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  const auto whole = static_cast<int64_t>(std::round(seconds));
  if (whole < 3600) return fmt::format("{} min {:02} s", whole / 60, whole % 60);
  return fmt::format("{} h {:02} min", whole / 3600, whole / 60 % 60);
}

std::string bytes_text(double bytes) {
  if (bytes >= double(1 << 30)) return fmt::format("{:.2f} GiB", bytes / double(1 << 30));
  return fmt::format("{:.1f} MiB", bytes / double(1 << 20));
}

// Accuracies as percentages; losses and other metrics to four significant digits.
std::string metric_text(const std::string& name, double value) {
  if (name.find("accuracy") != std::string::npos) return fmt::format("{:.2f}%", value * 100);
  return fmt::format("{:.4g}", value);
}

double number_or(const nlohmann::json& object, const char* key, double fallback) {
  return object.is_object() && object.contains(key) && object[key].is_number() ? object[key].get<double>() : fallback;
}

std::string text_or(const nlohmann::json& object, const char* key, const std::string& fallback) {
  return object.is_object() && object.contains(key) && object[key].is_string() ? object[key].get<std::string>()
                                                                               : fallback;
}

using Facts = std::vector<std::pair<std::string, std::string>>;

std::string facts_table(const Facts& facts) {
  std::string html = "<table class=\"facts\">";
  for (const auto& [name, value] : facts) {
    html += fmt::format("<tr><th>{}</th><td>{}</td></tr>", html_escape(name), html_escape(value));
  }
  return html + "</table>\n";
}

// What ran: model, device, training and runtime settings, data, from config.json and summary.json.
std::string run_facts(const RunRecord& run) {
  const nlohmann::json& config = run.config.is_object() ? run.config : nlohmann::json::object();
  const nlohmann::json& model = config.value("model", nlohmann::json::object());
  const nlohmann::json& runtime = config.value("runtime", nlohmann::json::object());
  const nlohmann::json& compile = config.value("compile", nlohmann::json::object());
  const nlohmann::json& fit = config.value("fit", nlohmann::json::object());
  Facts facts;
  if (!model.empty()) {
    std::string text = text_or(model, "name", "model");
    std::vector<std::string> layers;
    for (const auto& layer : model.value("layers", nlohmann::json::array())) {
      if (layer.is_object() && !layer.empty()) layers.push_back(layer.begin().key());
    }
    if (!layers.empty()) text += fmt::format(": {}", fmt::join(layers, " → "));
    if (run.summary.is_object() && run.summary.contains("parameters")) {
      text += fmt::format(" ({} parameters)", grouped(run.summary["parameters"].get<double>()));
    }
    facts.emplace_back("Model", text);
  }
  std::string device = text_or(run.summary, "device", text_or(runtime, "device", ""));
  if (runtime.contains("threads")) device += fmt::format(", {} threads", runtime["threads"].dump());
  if (!device.empty()) facts.emplace_back("Device", device);
  if (!compile.empty()) {
    const nlohmann::json& optimizer = compile.value("optimizer", nlohmann::json());
    std::string text = optimizer.is_string() ? optimizer.get<std::string>() : text_or(optimizer, "name", "?");
    if (optimizer.is_object() && optimizer.contains("learning_rate")) {
      text += fmt::format(" (learning rate {})", optimizer["learning_rate"].dump());
    }
    const nlohmann::json& loss = compile.value("loss", nlohmann::json());
    text += ", loss " + (loss.is_string() ? loss.get<std::string>() : text_or(loss, "name", "?"));
    if (fit.contains("batch_size")) text += fmt::format(", batch size {}", fit["batch_size"].dump());
    if (fit.contains("epochs") && fit["epochs"].is_number_integer()) {
      const auto epochs = fit["epochs"].get<int64_t>();
      text += fmt::format(", {} epoch{}", epochs, epochs == 1 ? "" : "s");
    }
    facts.emplace_back("Training", text);
  }
  if (!runtime.empty()) {
    std::vector<std::string> modes = {runtime.value("graph", false) ? "graph" : "eager"};
    if (runtime.value("jit", false)) modes.emplace_back("JIT");
    modes.push_back(text_or(runtime, "precision", "float32"));
    if (runtime.contains("seed") && runtime["seed"].is_number()) {
      modes.push_back(fmt::format("seed {}", runtime["seed"].dump()));
    }
    if (runtime.value("deterministic", false)) modes.emplace_back("deterministic");
    facts.emplace_back("Runtime", fmt::format("{}", fmt::join(modes, ", ")));
  }
  if (config.contains("data") && config["data"].is_object()) {
    std::vector<std::string> splits;
    for (const auto& [split, source] : config["data"].items()) {
      const std::string where = text_or(source, "images", text_or(source, "path", ""));
      splits.push_back(where.empty() ? split : fmt::format("{}: {}", split, where));
    }
    facts.emplace_back("Data", fmt::format("{}", fmt::join(splits, "; ")));
  }
  std::string html = facts_table(facts);
  if (!run.config.is_null()) {
    html += fmt::format("<details><summary>The config as run (config.json)</summary><pre>{}</pre></details>\n",
                        html_escape(config.dump(2)));
  }
  return html;
}

// The summary's figures, rounded and with units, and the final validation metrics.
std::string summary_facts(const nlohmann::json& summary) {
  Facts facts;
  if (summary.contains("samples_per_sec")) {
    facts.emplace_back("Throughput", grouped(summary["samples_per_sec"].get<double>()) + " samples/s");
  }
  if (summary.contains("samples_total") && summary.contains("steps")) {
    facts.emplace_back("Trained on",
                       fmt::format("{} samples in {} steps", grouped(summary["samples_total"].get<double>()),
                                   grouped(summary["steps"].get<double>())));
  }
  const double wall = number_or(summary, "wall_seconds", 0);
  if (wall > 0) facts.emplace_back("Wall time", duration_text(wall));
  if (summary.contains("input_wait_seconds_total")) {
    const double wait = summary["input_wait_seconds_total"].get<double>();
    facts.emplace_back("Waiting for input",
                       wall > 0 ? fmt::format("{} ({:.1f}% of the wall time)", duration_text(wait), 100 * wait / wall)
                                : duration_text(wait));
  }
  if (summary.contains("peak_memory_bytes")) {
    facts.emplace_back("Peak allocator memory", bytes_text(summary["peak_memory_bytes"].get<double>()));
  }
  if (summary.contains("host_peak_rss_bytes")) {
    facts.emplace_back("Peak resident memory", bytes_text(summary["host_peak_rss_bytes"].get<double>()));
  }
  if (summary.contains("final") && summary["final"].is_object()) {
    for (const auto& [name, value] : summary["final"].items()) {
      if (value.is_number()) facts.emplace_back("Final " + name, metric_text(name, value.get<double>()));
    }
  }
  if (summary.value("interrupted", false)) facts.emplace_back("Interrupted", "yes (a signal stopped the run)");
  return facts_table(facts);
}

// One row per epoch: its metrics rounded, and its own time (the records hold the time since the start).
std::string epoch_table(const nlohmann::json& epochs) {
  std::vector<std::string> names;
  for (const auto& [name, value] : epochs.front().items()) {
    if (name != "epoch" && name != "elapsed_seconds" && value.is_number()) names.push_back(name);
  }
  std::string html = "<table class=\"epochs\"><tr><th>epoch</th>";
  for (const std::string& name : names) html += fmt::format("<th>{}</th>", html_escape(name));
  html += "<th>time</th></tr>";
  double previous = 0;
  for (const auto& epoch : epochs) {
    html += fmt::format("<tr><td>{}</td>", epoch.value("epoch", nlohmann::json()).dump());
    for (const std::string& name : names) {
      html += fmt::format("<td>{}</td>", epoch.contains(name) ? metric_text(name, epoch[name].get<double>()) : "");
    }
    const double elapsed = number_or(epoch, "elapsed_seconds", previous);
    html += fmt::format("<td>{}</td></tr>", duration_text(elapsed - previous));
    previous = elapsed;
  }
  return html + "</table>\n";
}

// The loss of every step's batch, and the epoch's running mean the progress bar shows, averaged over
// groups of steps past 600 points.
Chart step_loss_chart(const RunRecord& run) {
  Chart chart{.title = "Loss per step", .x_label = "step", .y_label = "loss", .series = {}, .stacked = false};
  ChartSeries batch{.name = "batch loss", .points = {}}, running{.name = "epoch's running mean", .points = {}};
  const size_t group = std::max<size_t>(1, (run.steps.size() + 599) / 600);
  for (size_t begin = 0; begin < run.steps.size(); begin += group) {
    const size_t end = std::min(run.steps.size(), begin + group);
    double batch_sum = 0, running_sum = 0;
    size_t batches = 0;
    for (size_t i = begin; i < end; ++i) {
      running_sum += run.steps[i].loss;
      if (run.steps[i].batch_loss) {
        batch_sum += *run.steps[i].batch_loss;
        ++batches;
      }
    }
    const auto step = double(run.steps[begin].step);
    if (batches > 0) batch.points.emplace_back(step, batch_sum / double(batches));
    running.points.emplace_back(step, running_sum / double(end - begin));
  }
  if (!batch.points.empty()) chart.series.push_back(std::move(batch));
  chart.series.push_back(std::move(running));
  return chart;
}

// The summary's epochs, by metric name: losses on one chart, the other metrics on another.
Chart epoch_chart(const nlohmann::json& epochs, bool losses) {
  Chart chart{.title = losses ? "Loss per epoch" : "Metrics per epoch",
              .x_label = "epoch",
              .y_label = losses ? "loss" : "value",
              .series = {},
              .stacked = false};
  std::map<std::string, ChartSeries> by_name;
  for (const auto& epoch : epochs) {
    for (const auto& [name, value] : epoch.items()) {
      if (name == "epoch" || name == "elapsed_seconds" || !value.is_number()) continue;
      if ((name.find("loss") != std::string::npos) != losses) continue;
      by_name[name].name = name;
      by_name[name].points.emplace_back(epoch["epoch"].get<double>(), value.get<double>());
    }
  }
  for (auto& [name, series] : by_name) chart.series.push_back(std::move(series));
  return chart;
}

double start_time(const RunRecord& run) {
  double start = run.steps.empty() ? 0 : run.steps.front().time - run.steps.front().step_seconds;
  if (!run.samples.empty() && (run.steps.empty() || run.samples.front().time < start)) start = run.samples.front().time;
  return start;
}

// Samples per second, per whole second of the run; a run of under a minute in windows of a 60th of its
// length, so that a short run draws a line too.
Chart throughput_chart(const RunRecord& run) {
  Chart chart{
      .title = "Throughput", .x_label = "seconds since start", .y_label = "samples/s", .series = {}, .stacked = false};
  const double start = start_time(run);
  const double length = run.steps.empty() ? 0.0 : run.steps.back().time - start;
  const double window = std::clamp(length / 60.0, 1e-3, 1.0);
  std::map<int64_t, double> per_window;
  for (const StepLine& step : run.steps)
    per_window[int64_t(std::floor((step.time - start) / window))] += double(step.samples);
  ChartSeries series{.name = "samples/s", .points = {}};
  for (const auto& [index, samples] : per_window) series.points.emplace_back(double(index) * window, samples / window);
  chart.series.push_back(std::move(series));
  return chart;
}

// Milliseconds per span, per step (averaged over groups of steps past 300 points).
Chart breakdown_chart(const RunRecord& run) {
  Chart chart{.title = "Step time breakdown", .x_label = "step", .y_label = "ms", .series = {}, .stacked = true};
  std::vector<const StepLine*> steps;
  for (const StepLine& step : run.steps) {
    if (step.spans) steps.push_back(&step);
  }
  const size_t group = std::max<size_t>(1, (steps.size() + 299) / 300);
  for (size_t s = 0; s <= kNumSpans; ++s) {
    ChartSeries series{.name = s < kNumSpans ? std::string(span_name(static_cast<Span>(s))) : "other", .points = {}};
    for (size_t begin = 0; begin < steps.size(); begin += group) {
      const size_t end = std::min(steps.size(), begin + group);
      double ms = 0;
      for (size_t i = begin; i < end; ++i) {
        const double spans = steps[i]->spans->sum();
        ms += 1e3 * (s < kNumSpans ? steps[i]->spans->seconds[s] : std::max(0.0, steps[i]->step_seconds - spans));
      }
      series.points.emplace_back(double(begin), ms / double(end - begin));
    }
    chart.series.push_back(std::move(series));
  }
  return chart;
}

// Device utilization from the samplers; without NVML, the process's CPU use stands in and says so.
Chart utilization_chart(const RunRecord& run) {
  const double start = start_time(run);
  Chart chart{.title = "Utilization",
              .x_label = "seconds since start",
              .y_label = "% (CPU: 100 = one core)",
              .series = {},
              .stacked = false};
  std::map<int, ChartSeries> devices;
  ChartSeries cpu{.name = "process CPU", .points = {}};
  for (const SampleLine& sample : run.samples) {
    cpu.points.emplace_back(sample.time - start, sample.host_cpu_ratio * 100);
    for (const DeviceSample& d : sample.devices) {
      if (!d.sm_util_percent) continue;
      devices[d.index].name = fmt::format("gpu {} sm", d.index);
      devices[d.index].points.emplace_back(sample.time - start, *d.sm_util_percent);
    }
  }
  for (auto& [index, series] : devices) chart.series.push_back(std::move(series));
  chart.series.push_back(std::move(cpu));
  return chart;
}

// Device memory in use at each step's end, by kind (allocator), and the devices' own figure (NVML).
Chart memory_chart(const RunRecord& run) {
  const double start = start_time(run);
  Chart chart{.title = "Memory", .x_label = "seconds since start", .y_label = "MiB", .series = {}, .stacked = false};
  ChartSeries allocator{.name = "allocator in use", .points = {}};
  for (const StepLine& step : run.steps) {
    if (step.memory_bytes.empty()) continue;
    double total = 0;
    for (const auto& [kind, bytes] : step.memory_bytes) total += bytes;
    allocator.points.emplace_back(step.time - start, total / (1 << 20));
  }
  chart.series.push_back(std::move(allocator));
  std::map<int, ChartSeries> devices;
  for (const SampleLine& sample : run.samples) {
    for (const DeviceSample& d : sample.devices) {
      if (!d.memory_used_bytes) continue;
      devices[d.index].name = fmt::format("gpu {} used", d.index);
      devices[d.index].points.emplace_back(sample.time - start, *d.memory_used_bytes / (1 << 20));
    }
  }
  for (auto& [index, series] : devices) chart.series.push_back(std::move(series));
  return chart;
}

}  // namespace

std::string render_report(const RunRecord& run) {
  const Diagnosis diagnosis = diagnose(run);
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Nimbus run report: {}</title>\n"
      "<style>body{{font-family:sans-serif;max-width:1320px;margin:24px auto;color:#222}}"
      ".finding{{border-left:4px solid #d62728;background:#fff4f4;padding:8px 12px;margin:8px 0}}"
      ".ok{{border-left:4px solid #2ca02c;background:#f4fff4;padding:8px 12px}}"
      ".charts{{display:flex;flex-wrap:wrap;gap:16px}}table{{border-collapse:collapse;margin:8px 0}}"
      "th,td{{text-align:left;padding:3px 14px 3px 0;vertical-align:top}}.epochs td,.epochs th{{text-align:right}}"
      "pre{{background:#f6f6f6;padding:8px;font-size:12px}}</style></head><body>\n"
      "<h1>Nimbus run report</h1><p>{}</p>\n",
      html_escape(run.source), html_escape(run.source));
  html += run_facts(run);
  html += "<h2>Doctor</h2>\n";
  if (diagnosis.findings.empty()) html += "<div class=\"ok\">No problem found.</div>\n";
  for (const Finding& finding : diagnosis.findings) {
    html += fmt::format("<div class=\"finding\"><b>{}</b><br>Evidence: {}<br>Remedy: {}</div>\n",
                        html_escape(finding.title), html_escape(finding.evidence), html_escape(finding.remedy));
  }
  for (const std::string& silent : diagnosis.rules_silent) {
    html += fmt::format("<div><small>silent (no data): {}</small></div>\n", html_escape(silent));
  }
  const bool has_epochs = run.summary.is_object() && run.summary.contains("epochs") &&
                          run.summary["epochs"].is_array() && !run.summary["epochs"].empty();
  if (run.summary.is_object()) {
    html += "<h2>Summary</h2>\n" + summary_facts(run.summary);
    if (has_epochs) html += epoch_table(run.summary["epochs"]);
  }
  // Metrics, times, rates and memory each on charts of their own: one axis, one unit.
  std::vector<Chart> charts = {step_loss_chart(run)};
  // One epoch is one point: the table above says it better.
  if (has_epochs && run.summary["epochs"].size() > 1) {
    charts.push_back(epoch_chart(run.summary["epochs"], /*losses=*/true));
    Chart metrics = epoch_chart(run.summary["epochs"], /*losses=*/false);
    if (!metrics.series.empty()) charts.push_back(std::move(metrics));
  }
  charts.push_back(throughput_chart(run));
  charts.push_back(breakdown_chart(run));
  charts.push_back(utilization_chart(run));
  charts.push_back(memory_chart(run));
  html += "<h2>Plots</h2><div class=\"charts\">\n";
  for (const Chart& chart : charts) html += render_svg(chart) + "\n";
  return html + "</div></body></html>\n";
}

}  // namespace nimbus::monitor
