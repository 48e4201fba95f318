// The input pipeline's stage statistics (data::Iterator::stats_json()) as
// nimbus_pipeline_* metrics, one series per stage, labelled with the stage's
// name and depth (0 = the node the trainer reads):
//
//   nimbus_pipeline_elements_total{stage="map",depth="1"}              counter
//   nimbus_pipeline_busy_seconds_total / _input_wait_seconds_total /
//     _consumer_wait_seconds_total / _errors_skipped_total              counters
//   nimbus_pipeline_buffer_fill / _buffer_capacity / _buffer_bytes /
//     _parallelism (what AUTOTUNE chose, where it chose)                gauges
//
//   run_monitor.watch_pipeline([&iterator] { return iterator.stats_json(); });
#pragma once

#include <string>

#include "nimbus/monitor/metric_registry.h"

namespace nimbus::monitor {

// Throws DataError when `stats_json` is not the iterator's statistics format.
void publish_pipeline_stats(MetricRegistry& registry, const std::string& stats_json);

}  // namespace nimbus::monitor
