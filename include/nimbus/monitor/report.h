// `nimbus report`: one self-contained HTML page about a run (no script, no
// network), the doctor's findings first, then inline-SVG plots: loss and
// metrics per epoch, throughput over time, the step-time breakdown as
// stacked areas, device utilization and memory over time.
//
//   std::ofstream("report.html") << monitor::render_report(monitor::read_run_dir("runs/a"));
#pragma once

#include <string>

#include "nimbus/monitor/run_record.h"

namespace nimbus::monitor {

std::string render_report(const RunRecord& run);

}  // namespace nimbus::monitor
