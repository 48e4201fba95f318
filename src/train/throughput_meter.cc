#include "throughput_meter.h"

namespace nimbus::train {

void ThroughputMeter::begin_epoch() {
  if (past_warmup_) since_ = Clock::now();
}

void ThroughputMeter::step_done(int64_t samples, int64_t warmup_steps) {
  ++steps_;
  if (steps_ == warmup_steps) {
    past_warmup_ = true;
    since_ = Clock::now();
  }
  if (steps_ > warmup_steps) samples_ += samples;
}

void ThroughputMeter::end_epoch() {
  if (since_) seconds_ += std::chrono::duration<double>(Clock::now() - *since_).count();
  since_.reset();
}

double ThroughputMeter::samples_per_sec() const {
  return samples_ > 0 && seconds_ > 0 ? double(samples_) / seconds_ : 0;
}

}  // namespace nimbus::train
