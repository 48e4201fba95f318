// `nimbus report`: one self-contained HTML page about a run (no script, no
// network): what ran (model, device, config), the doctor's findings, the
// summary with rounded figures and units, then inline-SVG plots, one unit to
// a chart: loss per step, loss and metrics per epoch, throughput over time,
// the step-time breakdown as stacked areas, device utilization and memory.
//
//   std::ofstream("report.html") << monitor::render_report(monitor::read_run_dir("runs/a"));
#pragma once

#include <string>

#include "nimbus/monitor/run_record.h"

namespace nimbus::monitor {

std::string render_report(const RunRecord& run);

}  // namespace nimbus::monitor
