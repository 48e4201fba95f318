#include "nimbus/monitor/step_profiler.h"

#include <numeric>

#include "nimbus/base/error.h"

namespace nimbus::monitor {

std::string_view span_name(Span span) {
  switch (span) {
    case Span::kInputWait: return "input_wait";
    case Span::kHostToDevice: return "host_to_device";
    case Span::kCompute: return "compute";
    case Span::kAllReduce: return "allreduce";
    case Span::kOptimizerUpdate: return "optimizer_update";
    case Span::kCheckpoint: return "checkpoint";
    case Span::kCallbacks: return "callbacks";
  }
  return "unknown";
}

double SpanSeconds::sum() const { return std::accumulate(seconds.begin(), seconds.end(), 0.0); }

void StepAggregate::add(const StepRecord& record) {
  ++steps;
  samples += record.samples;
  step_seconds += record.seconds();
  for (size_t i = 0; i < kNumSpans; ++i) spans.seconds[i] += record.spans.seconds[i];
  loss_sum += record.loss;
}

StepProfiler::StepProfiler(size_t ring_capacity, size_t seconds_kept)
    : origin_(Clock::now()), ring_capacity_(ring_capacity), seconds_kept_(seconds_kept) {
  NIMBUS_ASSERT(ring_capacity > 0 && seconds_kept > 0) << "the profiler keeps at least one step and one second";
}

void StepProfiler::begin_step(int epoch, int64_t step) {
  current_ = StepRecord{};
  current_.epoch = epoch;
  current_.step = step;
  current_.global_step = steps_ended_;
  current_.first_start_ns.fill(-1);
  current_.start_ns = nanoseconds_since_origin(Clock::now());
  in_step_ = true;
}

StepProfiler::Scope::Scope(StepProfiler* profiler, Span span)
    : profiler_(profiler), span_(span), start_(Clock::now()), parent_(profiler->innermost_) {
  profiler_->innermost_ = this;
}

StepProfiler::Scope::~Scope() {
  const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  profiler_->innermost_ = parent_;
  if (parent_ != nullptr) parent_->inner_seconds_ += seconds;
  profiler_->close_span(span_, start_, seconds - inner_seconds_);
}

void StepProfiler::close_span(Span span, Clock::time_point start, double exclusive_seconds) {
  if (!in_step_) return;
  current_.spans[span] += exclusive_seconds;
  int64_t& first = current_.first_start_ns[static_cast<size_t>(span)];
  if (first < 0) first = nanoseconds_since_origin(start);
}

void StepProfiler::set_loss_scale(double scale, int64_t skipped_steps) {
  current_.loss_scale = scale;
  current_.skipped_steps = skipped_steps;
}

void StepProfiler::end_step(int64_t samples, double loss) {
  NIMBUS_ASSERT(in_step_) << "end_step without begin_step";
  current_.end_ns = nanoseconds_since_origin(Clock::now());
  current_.samples = samples;
  current_.loss = loss;
  in_step_ = false;
  ++steps_ended_;
  {
    std::lock_guard lock(mutex_);
    if (ring_.size() < ring_capacity_) {
      ring_.push_back(current_);
    } else {
      ring_[ring_next_] = current_;
    }
    ring_next_ = (ring_next_ + 1) % ring_capacity_;
    totals_.add(current_);
    per_epoch_[current_.epoch].add(current_);
    const int64_t second = current_.end_ns / 1'000'000'000;
    if (per_second_.empty() || per_second_.back().first != second) {
      if (per_second_.size() == seconds_kept_) per_second_.erase(per_second_.begin());
      per_second_.emplace_back(second, StepAggregate{});
    }
    per_second_.back().second.add(current_);
  }
  for (const auto& [id, observer] : observers_) observer(current_);
}

int StepProfiler::add_observer(std::function<void(const StepRecord&)> observer) {
  observers_.emplace(next_observer_id_, std::move(observer));
  return next_observer_id_++;
}

void StepProfiler::remove_observer(int id) { observers_.erase(id); }

std::vector<StepRecord> StepProfiler::recent_steps() const {
  std::lock_guard lock(mutex_);
  if (ring_.size() < ring_capacity_) return ring_;
  std::vector<StepRecord> ordered(ring_.begin() + long(ring_next_), ring_.end());
  ordered.insert(ordered.end(), ring_.begin(), ring_.begin() + long(ring_next_));
  return ordered;
}

StepAggregate StepProfiler::totals() const {
  std::lock_guard lock(mutex_);
  return totals_;
}

std::map<int, StepAggregate> StepProfiler::per_epoch() const {
  std::lock_guard lock(mutex_);
  return per_epoch_;
}

std::vector<std::pair<int64_t, StepAggregate>> StepProfiler::per_second() const {
  std::lock_guard lock(mutex_);
  return per_second_;
}

}  // namespace nimbus::monitor
