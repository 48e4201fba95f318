// The nimbus_ training metrics: declared in a registry (every counter at
// zero from the start, so the first scrape already lists them) and updated
// from each finished step.
//
//   monitor::TrainingMetrics metrics(registry, Device::cpu());
//   profiler.add_observer([&](const monitor::StepRecord& step) { metrics.on_step(step); });
//
// docs/monitoring.md lists every series with its meaning.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "nimbus/device/allocator.h"
#include "nimbus/device/device.h"
#include "nimbus/monitor/metric_registry.h"
#include "nimbus/monitor/step_profiler.h"

namespace nimbus::monitor {

// Bucket bounds of nimbus_step_seconds: 1 ms to 60 s, about three per decade.
const std::vector<double>& step_seconds_buckets();

// A memory tag as the kind label of nimbus_memory_bytes and the keys of step lines' "memory":
// "optimizer slots" -> "optimizer_slots".
std::string memory_kind_label(MemoryTag tag);

class TrainingMetrics {
 public:
  TrainingMetrics(MetricRegistry& registry, Device device);
  void on_step(const StepRecord& step);
  // Reads the device allocator's statistics into the memory gauges (on_step does it too).
  void update_memory();

 private:
  Device device_;
  Counter& steps_;
  Counter& samples_;
  Counter& input_wait_seconds_;
  std::array<Counter*, kNumSpans> span_seconds_{};
  Histogram& step_seconds_;
  Gauge& loss_;
  Gauge& epoch_;
  Gauge& loss_scale_;
  Counter& skipped_steps_;
  std::array<Gauge*, kNumMemoryTags> memory_by_tag_{};
  Gauge& memory_reserved_;
  Gauge& memory_peak_;
  Gauge& memory_limit_;
};

}  // namespace nimbus::monitor
