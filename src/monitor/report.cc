#include "nimbus/monitor/report.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "nimbus/monitor/doctor.h"
#include "nimbus/monitor/svg_chart.h"

namespace nimbus::monitor {

namespace {

// Per epoch by metric name: from the summary's "epochs" when there is one, else the mean step loss.
Chart epoch_chart(const RunRecord& run) {
  Chart chart{
      .title = "Loss and metrics per epoch", .x_label = "epoch", .y_label = "value", .series = {}, .stacked = false};
  std::map<std::string, ChartSeries> by_name;
  if (run.summary.is_object() && run.summary.contains("epochs")) {
    for (const auto& epoch : run.summary["epochs"]) {
      for (const auto& [name, value] : epoch.items()) {
        if (name == "epoch" || !value.is_number()) continue;
        by_name[name].name = name;
        by_name[name].points.emplace_back(epoch["epoch"].get<double>(), value.get<double>());
      }
    }
  }
  if (by_name.empty()) {
    std::map<int, std::pair<double, int>> loss;
    for (const StepLine& step : run.steps) {
      loss[step.epoch].first += step.loss;
      ++loss[step.epoch].second;
    }
    for (const auto& [epoch, sum] : loss) by_name["loss"].points.emplace_back(epoch, sum.first / sum.second);
    by_name["loss"].name = "loss (mean of steps)";
  }
  for (auto& [name, series] : by_name) chart.series.push_back(std::move(series));
  return chart;
}

double start_time(const RunRecord& run) {
  double start = run.steps.empty() ? 0 : run.steps.front().time - run.steps.front().step_seconds;
  if (!run.samples.empty() && (run.steps.empty() || run.samples.front().time < start)) start = run.samples.front().time;
  return start;
}

// Samples per second, per whole second of the run.
Chart throughput_chart(const RunRecord& run) {
  Chart chart{
      .title = "Throughput", .x_label = "seconds since start", .y_label = "samples/s", .series = {}, .stacked = false};
  const double start = start_time(run);
  std::map<int64_t, double> per_second;
  for (const StepLine& step : run.steps) per_second[int64_t(std::floor(step.time - start))] += double(step.samples);
  ChartSeries series{.name = "samples/s", .points = {}};
  for (const auto& [second, samples] : per_second) series.points.emplace_back(double(second), samples);
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
      ".charts{{display:flex;flex-wrap:wrap;gap:16px}}dt{{font-weight:bold}}</style></head><body>\n"
      "<h1>Nimbus run report</h1><p>{}</p>\n<h2>Doctor</h2>\n",
      html_escape(run.source), html_escape(run.source));
  if (diagnosis.findings.empty()) html += "<div class=\"ok\">No problem found.</div>\n";
  for (const Finding& finding : diagnosis.findings) {
    html += fmt::format("<div class=\"finding\"><b>{}</b><br>Evidence: {}<br>Remedy: {}</div>\n",
                        html_escape(finding.title), html_escape(finding.evidence), html_escape(finding.remedy));
  }
  for (const std::string& silent : diagnosis.rules_silent) {
    html += fmt::format("<div><small>silent (no data): {}</small></div>\n", html_escape(silent));
  }
  if (run.summary.is_object()) {
    html += "<h2>Summary</h2><dl>";
    for (const char* key : {"samples_per_sec", "samples_total", "steps", "wall_seconds", "input_wait_seconds_total"}) {
      if (run.summary.contains(key)) {
        html += fmt::format("<dt>{}</dt><dd>{}</dd>", key, html_escape(run.summary[key].dump()));
      }
    }
    html += "</dl>\n";
  }
  html += "<h2>Plots</h2><div class=\"charts\">\n";
  for (const Chart& chart :
       {epoch_chart(run), throughput_chart(run), breakdown_chart(run), utilization_chart(run), memory_chart(run)}) {
    html += render_svg(chart) + "\n";
  }
  return html + "</div></body></html>\n";
}

}  // namespace nimbus::monitor
