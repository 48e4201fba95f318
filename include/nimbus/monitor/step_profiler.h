// Step profiler: where each training step's wall time goes, as spans timed
// with the monotonic clock, kept in a ring buffer and aggregated per second
// and per epoch.
//
//   monitor::StepProfiler profiler;
//   profiler.begin_step(/*epoch=*/1, /*step=*/0);
//   { auto span = profiler.span(monitor::Span::kInputWait); batch = iterator.next(); }
//   { auto span = profiler.span(monitor::Span::kCompute);   loss = train_step(batch); }
//   profiler.end_step(/*samples=*/128, loss);
//   profiler.totals().span_seconds[monitor::Span::kInputWait];
//
// Spans nest: time spent in an inner span (a checkpoint written by a
// callback) counts for the inner one only, so a step's spans add up to at
// most its wall time; the rest (loop bookkeeping) is "other". A span opened
// outside a step counts for nothing. The trainer records input_wait (the
// batch's production: a blocked iterator or a gather), host_to_device,
// compute (forward and backward; the optimizer update too in graph mode,
// where it is part of the one traced step), allreduce (zero until
// distribution), optimizer_update (eager mode), checkpoint and callbacks.
//
// The profiler is used from the training thread; observers run there at
// end_step. Readers (samplers, the exporter) may call the const accessors
// from any thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

namespace nimbus::monitor {

enum class Span : uint8_t {
  kInputWait,
  kHostToDevice,
  kCompute,
  kAllReduce,
  kOptimizerUpdate,
  kCheckpoint,
  kCallbacks,
};
inline constexpr size_t kNumSpans = 7;

// "input_wait", "host_to_device", "compute", "allreduce", "optimizer_update", "checkpoint", "callbacks".
std::string_view span_name(Span span);

// Seconds per span, indexed by Span.
struct SpanSeconds {
  std::array<double, kNumSpans> seconds{};
  double& operator[](Span span) { return seconds[static_cast<size_t>(span)]; }
  double operator[](Span span) const { return seconds[static_cast<size_t>(span)]; }
  double sum() const;
};

struct StepRecord {
  int epoch = 0;            // 1-based, as Keras counts
  int64_t step = 0;         // within the epoch, 0-based
  int64_t global_step = 0;  // steps ended before this one, over the profiler's life
  // Nanoseconds since the profiler's origin (steady clock).
  int64_t start_ns = 0, end_ns = 0;
  SpanSeconds spans;  // exclusive time per span
  // Where each span was first entered in this step (ns since origin; -1 when it was not), for timelines.
  std::array<int64_t, kNumSpans> first_start_ns{};
  int64_t samples = 0;
  double loss = 0;
  // Mixed precision's dynamic loss scale after this step, and the steps skipped so far (when on).
  std::optional<double> loss_scale;
  int64_t skipped_steps = 0;

  double seconds() const { return double(end_ns - start_ns) * 1e-9; }
};

// Sums over a set of steps.
struct StepAggregate {
  int64_t steps = 0;
  int64_t samples = 0;
  double step_seconds = 0;
  SpanSeconds spans;
  double loss_sum = 0;  // of the steps' losses

  void add(const StepRecord& record);
  double mean_loss() const { return steps > 0 ? loss_sum / double(steps) : 0; }
};

class StepProfiler {
 public:
  using Clock = std::chrono::steady_clock;

  // Keeps the last `ring_capacity` steps (64 Ki steps: about 10 MiB) and the last
  // `seconds_kept` one-second aggregates.
  explicit StepProfiler(size_t ring_capacity = 65536, size_t seconds_kept = 3600);

  void begin_step(int epoch, int64_t step);
  // Ends the step begun last (a broken invariant when none is open) and calls the observers.
  void end_step(int64_t samples, double loss);
  // Records the loss scale into the running step (the trainer calls it before end_step when it scales).
  void set_loss_scale(double scale, int64_t skipped_steps);
  bool in_step() const { return in_step_; }
  // The open step as recorded so far (its closed spans); training thread only.
  const StepRecord& current_step() const { return current_; }

  // Ends its span when destroyed.
  class [[nodiscard]] Scope {
   public:
    Scope(StepProfiler* profiler, Span span);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StepProfiler* profiler_;
    Span span_;
    Clock::time_point start_;
    double inner_seconds_ = 0;  // time of spans nested in this one
    Scope* parent_;
  };
  Scope span(Span span) { return Scope(this, span); }

  // Runs `observer` after every end_step with the finished step, on the training thread, until
  // remove_observer(the returned id).
  int add_observer(std::function<void(const StepRecord&)> observer);
  void remove_observer(int id);

  // Copies, safe from any thread.
  std::vector<StepRecord> recent_steps() const;  // oldest first
  StepAggregate totals() const;
  std::map<int, StepAggregate> per_epoch() const;
  // (second since the origin, aggregate of the steps that ended in it), oldest first.
  std::vector<std::pair<int64_t, StepAggregate>> per_second() const;

  Clock::time_point origin() const { return origin_; }
  int64_t nanoseconds_since_origin(Clock::time_point t) const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin_).count();
  }

 private:
  void close_span(Span span, Clock::time_point start, double exclusive_seconds);

  const Clock::time_point origin_;
  const size_t ring_capacity_, seconds_kept_;

  // The open step, touched by the training thread only.
  bool in_step_ = false;
  StepRecord current_;
  Scope* innermost_ = nullptr;
  int64_t steps_ended_ = 0;
  std::map<int, std::function<void(const StepRecord&)>> observers_;
  int next_observer_id_ = 0;

  mutable std::mutex mutex_;  // guards what readers copy
  std::vector<StepRecord> ring_;
  size_t ring_next_ = 0;
  StepAggregate totals_;
  std::map<int, StepAggregate> per_epoch_;
  std::vector<std::pair<int64_t, StepAggregate>> per_second_;
};

}  // namespace nimbus::monitor
