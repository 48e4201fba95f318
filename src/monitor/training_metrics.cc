#include "nimbus/monitor/training_metrics.h"

#include <string>

#include "nimbus/device/memory.h"

namespace nimbus::monitor {

const std::vector<double>& step_seconds_buckets() {
  static const std::vector<double> buckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                              0.5,   1,      2.5,   5,    10,    30,   60};
  return buckets;
}

std::string memory_kind_label(MemoryTag tag) {
  std::string name(memory_tag_name(tag));
  for (char& c : name) {
    if (c == ' ') c = '_';
  }
  return name;
}

TrainingMetrics::TrainingMetrics(MetricRegistry& registry, Device device)
    : device_(device),
      steps_(registry.counter("nimbus_steps_total", "Training steps (optimizer updates) finished.")),
      samples_(registry.counter("nimbus_samples_total", "Training samples processed, over all replicas.")),
      input_wait_seconds_(
          registry.counter("nimbus_input_wait_seconds_total", "Seconds the training loop waited for its next batch.")),
      step_seconds_(
          registry.histogram("nimbus_step_seconds", "Wall time of one training step.", step_seconds_buckets())),
      loss_(registry.gauge("nimbus_loss", "Loss of the last training step.")),
      epoch_(registry.gauge("nimbus_epoch", "The epoch being trained (1-based).")),
      loss_scale_(
          registry.gauge("nimbus_loss_scale", "Dynamic loss scale of mixed_float16 training (0: not scaling).")),
      skipped_steps_(registry.counter("nimbus_skipped_steps_total",
                                      "Steps whose update loss scaling skipped for an inf or NaN gradient.")),
      memory_reserved_(registry.gauge("nimbus_memory_reserved_bytes", "Device memory the allocator holds.",
                                      {{"device", device.to_string()}})),
      memory_peak_(registry.gauge("nimbus_memory_peak_bytes", "Peak device memory in use by tensors.",
                                  {{"device", device.to_string()}})),
      memory_limit_(registry.gauge("nimbus_memory_limit_bytes", "The most the device allocator may hold (0: no limit).",
                                   {{"device", device.to_string()}})) {
  for (size_t i = 0; i < kNumSpans; ++i) {
    span_seconds_[i] = &registry.counter("nimbus_step_span_seconds_total",
                                         "Seconds of training steps spent in each span (exclusive time).",
                                         {{"span", std::string(span_name(static_cast<Span>(i)))}});
  }
  for (size_t i = 0; i < kNumMemoryTags; ++i) {
    memory_by_tag_[i] = &registry.gauge("nimbus_memory_bytes", "Device memory in use by tensors, by what they hold.",
                                        {{"device", device.to_string()}, {"kind", memory_kind_label(MemoryTag(i))}});
  }
  update_memory();
}

void TrainingMetrics::on_step(const StepRecord& step) {
  steps_.add(1);
  samples_.add(double(step.samples));
  input_wait_seconds_.add(step.spans[Span::kInputWait]);
  for (size_t i = 0; i < kNumSpans; ++i) span_seconds_[i]->add(step.spans.seconds[i]);
  step_seconds_.observe(step.seconds());
  loss_.set(step.loss);
  epoch_.set(step.epoch);
  if (step.loss_scale) {
    loss_scale_.set(*step.loss_scale);
    skipped_steps_.advance_to(double(step.skipped_steps));
  }
  update_memory();
}

void TrainingMetrics::update_memory() {
  const AllocatorStats stats = memory_stats(device_);
  for (size_t i = 0; i < kNumMemoryTags; ++i) memory_by_tag_[i]->set(double(stats.by_tag[i].bytes_in_use));
  memory_reserved_.set(double(stats.bytes_reserved));
  memory_peak_.set(double(stats.peak_bytes_in_use));
  memory_limit_.set(double(stats.bytes_limit));
}

}  // namespace nimbus::monitor
