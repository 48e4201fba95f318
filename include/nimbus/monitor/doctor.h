// `nimbus doctor`: why a run is slow or unhealthy, from what it recorded.
// Each rule names the data it needs and stays silent without it; each
// finding carries its evidence and a concrete remedy. docs/monitoring.md
// writes the rules down with their thresholds.
//
//   monitor::Diagnosis d = monitor::diagnose(monitor::read_run_dir("runs/a"));
//   std::cout << monitor::format_diagnosis(d);
#pragma once

#include <string>
#include <vector>

#include "nimbus/monitor/run_record.h"

namespace nimbus::monitor {

struct Finding {
  std::string rule;   // "input_bound", "launch_bound", "memory_growth", "memory_headroom", "loss_scale", "stragglers"
  std::string title;  // one line: what is wrong
  std::string evidence;  // the figures that show it
  std::string remedy;    // what to do
};

struct Diagnosis {
  std::vector<Finding> findings;
  std::vector<std::string> rules_checked;  // rules that had their data
  std::vector<std::string> rules_silent;   // "rule: the data it lacked"
};

Diagnosis diagnose(const RunRecord& run);
std::string format_diagnosis(const Diagnosis& diagnosis);

// Steps before this index are warm-up (tracing, first allocations): rules look at the rest.
size_t warmup_steps(size_t total_steps);

}  // namespace nimbus::monitor
