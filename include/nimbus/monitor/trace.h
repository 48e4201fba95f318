// Timeline export: training steps and their spans as a Chrome trace
// (the JSON "Trace Event Format" that chrome://tracing and ui.perfetto.dev open).
//
//   monitor::write_chrome_trace(profiler.recent_steps(), "runs/x/trace.json");
//
// Each step is a complete event ("ph": "X") named "step" with its epoch,
// step, samples and loss as args; each span entered in the step is a
// complete event inside it, starting where the span was first entered and
// lasting its exclusive time. Timestamps are microseconds since the profiler's origin.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nimbus/monitor/step_profiler.h"

namespace nimbus::monitor {

nlohmann::json chrome_trace(const std::vector<StepRecord>& steps);
// Writes chrome_trace(steps) to `path`; throws NotFound naming the path when it cannot be written.
void write_chrome_trace(const std::vector<StepRecord>& steps, const std::string& path);

}  // namespace nimbus::monitor
