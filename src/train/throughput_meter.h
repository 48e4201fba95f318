// fit's training throughput (History::samples_per_sec): samples per second after a warm-up
// (tracing, the first steps), over the steps' time only, so validation, checkpoints and other
// epoch-end work are left out. Internal to the library.
//
//   ThroughputMeter meter;
//   meter.begin_epoch();
//   meter.step_done(batch_size, warmup_steps);   // after each step
//   meter.end_epoch();                           // before the epoch's validation
//   meter.samples_per_sec();
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace nimbus::train {

class ThroughputMeter {
 public:
  // Timing resumes at an epoch's start once the warm-up is over.
  void begin_epoch();
  // After step number steps() + 1 of the fit, of `samples` samples; the warm-up ends at step
  // `warmup_steps`, and the samples of steps after it count.
  void step_done(int64_t samples, int64_t warmup_steps);
  // Stops timing until the next epoch begins.
  void end_epoch();

  // Steps done in this fit.
  int64_t steps() const { return steps_; }
  // 0 until a step after the warm-up has been timed.
  double samples_per_sec() const;

 private:
  using Clock = std::chrono::steady_clock;
  int64_t steps_ = 0;
  bool past_warmup_ = false;
  std::optional<Clock::time_point> since_;
  double seconds_ = 0;
  int64_t samples_ = 0;
};

}  // namespace nimbus::train
