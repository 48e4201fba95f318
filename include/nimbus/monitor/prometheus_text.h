// The Prometheus text exposition format (version 0.0.4), written from a
// MetricRegistry:
//
//   # HELP nimbus_samples_total Training samples processed.
//   # TYPE nimbus_samples_total counter
//   nimbus_samples_total 1024
//   # HELP nimbus_step_seconds Wall time of one training step.
//   # TYPE nimbus_step_seconds histogram
//   nimbus_step_seconds_bucket{le="0.01"} 3
//   nimbus_step_seconds_bucket{le="+Inf"} 8
//   nimbus_step_seconds_sum 0.42
//   nimbus_step_seconds_count 8
//
// Each family's lines form one group, HELP then TYPE first; help text escapes
// `\` and newline, label values escape `\`, `"` and newline; every line ends
// with '\n'. Families appear in declaration order.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "nimbus/monitor/metric_registry.h"

namespace nimbus::monitor {

// The Content-Type an exporter sends with this text.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

std::string prometheus_text(const MetricRegistry& registry);

// One sample line of the text format, read back (for `nimbus dmon --url` and `doctor --url`).
struct ParsedSample {
  std::string name;  // with its _bucket/_sum/_count suffix for histograms
  Labels labels;
  double value = 0;
  // The value of label `name`, empty when absent.
  std::string label(const std::string& name) const;
};
// Parses exposition text (comments and blank lines skipped); throws DataError naming the line
// number of a malformed line.
std::vector<ParsedSample> parse_prometheus_text(std::string_view text);

// The pieces, exposed for tests: a sample value as Prometheus writes it (integers without an
// exponent, otherwise the shortest round-trip form; NaN, +Inf, -Inf), and the two escapes.
std::string format_sample_value(double value);
std::string escape_help(std::string_view text);
std::string escape_label_value(std::string_view text);

}  // namespace nimbus::monitor
