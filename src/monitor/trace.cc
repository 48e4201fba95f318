#include "nimbus/monitor/trace.h"

#include <fmt/format.h>

#include <fstream>

#include "nimbus/base/error.h"

namespace nimbus::monitor {

nlohmann::json chrome_trace(const std::vector<StepRecord>& steps) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", "training"}}}});
  for (const StepRecord& step : steps) {
    events.push_back(
        {{"name", "step"},
         {"cat", "step"},
         {"ph", "X"},
         {"ts", double(step.start_ns) * 1e-3},
         {"dur", double(step.end_ns - step.start_ns) * 1e-3},
         {"pid", 1},
         {"tid", 1},
         {"args", {{"epoch", step.epoch}, {"step", step.step}, {"samples", step.samples}, {"loss", step.loss}}}});
    for (size_t i = 0; i < kNumSpans; ++i) {
      if (step.first_start_ns[i] < 0) continue;
      events.push_back({{"name", std::string(span_name(static_cast<Span>(i)))},
                        {"cat", "span"},
                        {"ph", "X"},
                        {"ts", double(step.first_start_ns[i]) * 1e-3},
                        {"dur", step.spans.seconds[i] * 1e6},
                        {"pid", 1},
                        {"tid", 1}});
    }
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

void write_chrome_trace(const std::vector<StepRecord>& steps, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw NotFound(fmt::format("{}: cannot write the trace", path));
  out << chrome_trace(steps).dump() << "\n";
}

}  // namespace nimbus::monitor
