// map: fn on each element. Sequential on the consumer's thread, or parallel:
// a runner thread pulls input elements ahead into an ordered buffer, and pool
// tasks run the calls, each taking the next pulled element itself when it
// finishes one; results come back in input order (deterministic) or as they
// finish. With kAutotune the number of calls in flight follows the measured
// time per call and the consumer's demand (see tune()).
#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <cmath>

#include "nimbus/base/error.h"
#include "src/data/pipeline.h"

namespace nimbus::data::detail {
namespace {

constexpr int kAutotuneWindow = 8;  // consumer calls between two decisions
constexpr double kEmaWeight = 0.2;

double ema(double old, double sample) { return old <= 0 ? sample : old + kEmaWeight * (sample - old); }

class SequentialMapIterator : public IteratorImpl {
 public:
  SequentialMapIterator(std::shared_ptr<NodeStats> stats, const MapFn* fn, std::unique_ptr<IteratorImpl> input)
      : IteratorImpl(std::move(stats)), fn_(fn), input_(std::move(input)) {}
  std::optional<Element> get_next() override {
    auto element = pull(*input_);
    if (!element) return std::nullopt;
    return (*fn_)(*element);
  }

 private:
  const MapFn* fn_;
  std::unique_ptr<IteratorImpl> input_;
};

// One input element, from the moment the runner pulls it until the consumer
// takes its result. Shared with pool tasks, so a task that finishes after its
// iterator is gone writes into a slot nobody reads.
struct Call {
  int64_t index = 0;             // in the map's output
  std::optional<Element> input;  // until a pool task takes it
  bool done = false;
  std::optional<Element> result;
  std::exception_ptr error;
};

// What pool tasks touch: owned jointly, so a task still running after its
// iterator is destroyed stays safe. Guarded by `mutex` unless atomic.
struct Shared {
  std::mutex mutex;
  // Separate wake-ups for the consumer (a result is ready or the input ended)
  // and the runner (the consumer made room), each sent only when that side
  // waits: a wake-up nobody needs costs a context switch.
  std::condition_variable result_ready, room;
  bool runner_waiting = false;
  bool consumer_waiting = false;
  const Call* awaited = nullptr;  // the call the waiting consumer needs; null: any
  MapFn fn;
  std::shared_ptr<BatchSlots> batch_slots;  // set when a batch follows: results go into its rows
  std::shared_ptr<NodeStats> stats;
  std::deque<std::shared_ptr<Call>> waiting;  // pulled, in input order, not yet started
  int workers = 0;                            // pool tasks running calls
  int parallelism = 1;                        // at most this many workers
  double fn_time_ema_ns = 0;
};

// A pool task: runs waiting calls one after another, taking the next one
// itself as soon as it finishes one (no hop through the runner), and ends when
// none waits or the parallelism was lowered. It never blocks: the runner alone
// pulls input, so the pool's threads cannot all end up waiting on a pipeline
// stage that needs a pool thread to make progress.
void run_calls(const std::shared_ptr<Shared>& shared) {
  std::unique_lock lock(shared->mutex);
  for (;;) {
    if (shared->waiting.empty() || shared->workers > shared->parallelism) {
      shared->workers--;
      return;
    }
    std::shared_ptr<Call> call = std::move(shared->waiting.front());
    shared->waiting.pop_front();
    Element element = std::move(*call->input);
    call->input.reset();
    lock.unlock();
    const int64_t begin = now_ns();
    std::optional<Element> result;
    std::exception_ptr error;
    try {
      const BatchRowScope row(shared->batch_slots.get(), call->index);
      result = shared->fn(element);
      if (shared->batch_slots) result = shared->batch_slots->place(call->index, std::move(*result));
    } catch (...) {
      error = std::current_exception();
    }
    const int64_t took = now_ns() - begin;
    shared->stats->busy_ns += took;
    element.clear();  // the input's tensors go back on this thread, outside the lock
    lock.lock();
    shared->fn_time_ema_ns = ema(shared->fn_time_ema_ns, static_cast<double>(took));
    call->result = std::move(result);
    call->error = std::move(error);
    call->done = true;
    // Let go of the call here, under the lock: the consumer then owns the
    // last reference and frees the result (or exception) on its thread.
    const bool wake = shared->consumer_waiting && (shared->awaited == nullptr || shared->awaited == call.get());
    call.reset();
    if (wake) {
      lock.unlock();  // the consumer wakes to a free mutex
      shared->result_ready.notify_one();
      lock.lock();
    }
  }
}

class ParallelMapIterator : public IteratorImpl {
 public:
  ParallelMapIterator(std::shared_ptr<NodeStats> stats, MapFn fn, std::unique_ptr<IteratorImpl> input, int parallelism,
                      bool deterministic, std::shared_ptr<BatchSlots> batch_slots, IteratorContext& ctx)
      : IteratorImpl(std::move(stats), /*asynchronous=*/true),
        input_(std::move(input)),
        autotune_(parallelism == kAutotune),
        deterministic_(deterministic),
        cores_(ctx.cores),
        pool_(ctx.pool),
        cancelled_(ctx.cancelled),
        shared_(std::make_shared<Shared>()) {
    shared_->fn = std::move(fn);
    shared_->batch_slots = std::move(batch_slots);
    shared_->stats = stats_shared();
    shared_->parallelism = autotune_ ? 1 : parallelism;
    this->stats().parallelism = shared_->parallelism;
    this->stats().autotuned = autotune_;
    this->stats().buffer_capacity = capacity();
    if (autotune_) this->stats().set_note(fmt::format("autotune: starts at 1, cap {} cores", cores_));
    if (!autotune_ && parallelism > cores_) {
      this->stats().set_note(
          fmt::format("{} calls in flight, but the pool has {} threads (one per core)", parallelism, cores_));
    }
    runner_ = std::thread([this] { run(); });
  }

  ~ParallelMapIterator() override {
    {
      std::lock_guard lock(shared_->mutex);
      stop_ = true;
      shared_->waiting.clear();  // calls not started never start
    }
    shared_->room.notify_all();
    runner_.join();
  }

  std::optional<Element> get_next() override {
    const int64_t arrived = now_ns();
    if (last_return_ns_ > 0) gap_ema_ = ema(gap_ema_, static_cast<double>(arrived - last_return_ns_));
    std::unique_lock lock(shared_->mutex);
    std::shared_ptr<Call> call;
    bool waited = false;
    auto ready = [&] {
      if (deterministic_) {
        if (!calls_.empty() && calls_.front()->done) {
          call = calls_.front();
          calls_.pop_front();
          return true;
        }
      } else {
        for (auto it = calls_.begin(); it != calls_.end(); ++it) {
          if ((*it)->done) {
            call = *it;
            calls_.erase(it);
            return true;
          }
        }
      }
      return calls_.empty() && input_done_;
    };
    if (!ready()) {
      waited = true;
      shared_->consumer_waiting = true;
      // In order, only the oldest call's result lets the consumer go on.
      shared_->awaited = deterministic_ ? awaited_call() : nullptr;
      // After a wake-up for a call other than the oldest, the next call to wait for.
      const auto ready_or_await_next = [&] {
        if (ready()) return true;
        if (deterministic_) shared_->awaited = awaited_call();
        return false;
      };
      try {
        wait_unless_cancelled(lock, shared_->result_ready, *cancelled_, ready_or_await_next);
      } catch (...) {
        shared_->consumer_waiting = false;
        throw;
      }
      shared_->consumer_waiting = false;
    }
    stats().buffer_fill = static_cast<int64_t>(calls_.size());
    if (autotune_) tune(waited, static_cast<double>(now_ns() - arrived));
    const bool wake_runner = call && shared_->runner_waiting && static_cast<int>(calls_.size()) <= refill_below();
    lock.unlock();
    if (wake_runner) shared_->room.notify_one();
    last_return_ns_ = now_ns();
    if (!call) return std::nullopt;
    if (shared_->batch_slots) shared_->batch_slots->taken(call->index);
    if (call->error) std::rethrow_exception(call->error);
    return std::move(call->result);
  }

 private:
  // Elements between the runner and the consumer: pulled and waiting, running,
  // or done and waiting for the consumer (in input order when deterministic).
  // Four times the parallelism: the pool threads always find the next element
  // pulled, and finished results wait while an earlier call still runs.
  // Results placed into a batch's rows take no memory of their own: then up to a batch's worth (at
  // most 64) are in flight, and the runner and the consumer wake up that much less often.
  int capacity() const {
    const int calls = 4 * shared_->parallelism;
    if (!shared_->batch_slots) return calls;
    return std::max<int>(calls, static_cast<int>(std::min<int64_t>(shared_->batch_slots->batch_size(), 64)));
  }
  // The runner sleeps until the buffer is down to half, then fills it: one
  // wake-up per capacity() / 2 elements instead of one per element.
  int refill_below() const { return capacity() / 2; }

  // The call whose end wakes the waiting consumer, in input order: the oldest. When results go into
  // batch rows, the batch takes them all at once anyway: the last call of the front's batch that is
  // still running (among those pulled), so the consumer wakes about once per batch, not per row.
  const Call* awaited_call() const {
    if (calls_.empty()) return nullptr;
    if (!shared_->batch_slots) return calls_.front().get();
    const int64_t batch_size = shared_->batch_slots->batch_size();
    const int64_t batch_end = calls_.front()->index / batch_size * batch_size + batch_size - 1;
    const Call* last_running = calls_.front().get();
    for (const auto& call : calls_) {
      if (call->index > batch_end) break;
      if (!call->done) last_running = call.get();
    }
    return last_running;
  }

  // Starts pool tasks while calls wait, up to the parallelism (one that finds
  // nothing left to run ends at once). The caller holds the mutex.
  void start_workers() {
    while (shared_->workers < shared_->parallelism && !shared_->waiting.empty()) {
      shared_->workers++;
      pool_->submit([shared = shared_] { run_calls(shared); });
    }
  }

  // The runner: keeps up to capacity() elements pulled from the input ahead
  // of the consumer, and starts pool tasks when calls wait and fewer than
  // `parallelism` run.
  void run() {
    pthread_setname_np(pthread_self(), "nimbus-map");  // for the monitor's per-thread CPU
    for (;;) {
      {
        std::unique_lock lock(shared_->mutex);
        shared_->runner_waiting = true;
        if (static_cast<int>(calls_.size()) >= capacity()) {
          shared_->room.wait(lock, [this] { return stop_ || static_cast<int>(calls_.size()) <= refill_below(); });
        }
        shared_->runner_waiting = false;
        if (stop_) return;
        start_workers();  // the parallelism may have risen
      }
      auto call = std::make_shared<Call>();
      call->index = pulled_++;
      const int64_t start = now_ns();
      try {
        call->input = input_->next();
      } catch (const IterationCancelled&) {
        return;
      } catch (...) {
        call->error = std::current_exception();
        call->done = true;
      }
      stats().input_wait_ns += now_ns() - start;
      std::lock_guard lock(shared_->mutex);
      if (!call->done && !call->input) {
        input_done_ = true;
        shared_->result_ready.notify_one();
        return;
      }
      calls_.push_back(call);
      if (call->done) {
        shared_->result_ready.notify_one();  // an input error, ready at once
      } else {
        shared_->waiting.push_back(std::move(call));
        start_workers();
      }
      call.reset();  // the consumer's reference is the last: it frees the result or exception
    }
  }

  // Little's law: to hand the consumer one element every `gap` ns when each
  // call takes `fn_time` ns, fn_time / gap calls must be in flight. The
  // estimate is rounded up, raised while the consumer still waits, lowered
  // (by one per window) when it never waits and fewer would do; never above
  // the cores.
  void tune(bool waited, double wait_ns) {
    if (window_start_ns_ == 0) window_start_ns_ = now_ns();
    window_calls_++;
    if (waited) {
      window_waits_++;
      window_wait_ns_ += wait_ns;
    }
    if (window_calls_ < kAutotuneWindow) return;
    const double fn_time = shared_->fn_time_ema_ns;  // the caller holds the mutex
    // The consumer's own time between calls (the wait excluded).
    const double gap = std::max(gap_ema_ - window_wait_ns_ / window_calls_, 1000.0);
    const double needed = fn_time > 0 ? fn_time / gap : 1.0;
    const int parallelism = shared_->parallelism;
    int target = parallelism;
    const int estimate = static_cast<int>(std::ceil(needed));
    // Waits shorter than 5% of the window are thread hand-offs, not a
    // shortage of calls in flight.
    const double window_ns = std::max(1.0, static_cast<double>(now_ns() - window_start_ns_));
    const double wait_share = window_wait_ns_ / window_ns;
    if (wait_share > 0.05) {
      target = std::max(parallelism + 1, estimate);
    } else if (estimate + 1 < parallelism) {
      target = parallelism - 1;
    }
    target = std::clamp(target, 1, cores_);
    stats().set_note(fmt::format(
        "autotune: {} in flight — a call takes {:.3f} ms, the consumer asks every {:.3f} ms "
        "→ needs {:.1f}; consumer waited in {} of the last {} calls ({:.0f}% of the time); cap {} cores",
        target, fn_time / 1e6, gap / 1e6, needed, window_waits_, window_calls_, 100.0 * wait_share, cores_));
    shared_->parallelism = target;
    stats().parallelism = target;
    stats().buffer_capacity = capacity();
    window_calls_ = 0;
    window_waits_ = 0;
    window_wait_ns_ = 0;
    window_start_ns_ = now_ns();
  }

  std::unique_ptr<IteratorImpl> input_;
  const bool autotune_;
  const bool deterministic_;
  const int cores_;
  std::shared_ptr<ThreadPool> pool_;
  std::shared_ptr<std::atomic<bool>> cancelled_;
  std::shared_ptr<Shared> shared_;
  std::deque<std::shared_ptr<Call>> calls_;  // guarded by shared_->mutex
  int64_t pulled_ = 0;                       // the runner's count of input elements
  bool input_done_ = false;
  bool stop_ = false;
  std::thread runner_;
  double gap_ema_ = 0;
  int64_t last_return_ns_ = 0;
  int window_calls_ = 0, window_waits_ = 0;
  double window_wait_ns_ = 0;
  int64_t window_start_ns_ = 0;
};

class MapNode : public UnaryNode {
 public:
  MapNode(NodePtr input, MapFn fn, int parallelism, bool deterministic, std::string name)
      : UnaryNode(std::move(input)),
        fn_(std::move(fn)),
        parallelism_(parallelism),
        deterministic_(deterministic),
        name_(std::move(name)) {
    if (!fn_) throw InvalidArgument("map: no function given");
  }
  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    auto stats = node_stats(ctx, name_);
    // Results go into the rows of a batch that follows only when they come in order.
    std::shared_ptr<BatchSlots> batch_slots;
    if (ctx.batch_input == this && parallelism_ != 1 && deterministic_) batch_slots = std::move(ctx.batch_slots);
    auto input = make_input_iterator(*input_, ctx);
    if (parallelism_ == 1) return std::make_unique<SequentialMapIterator>(stats, &fn_, std::move(input));
    return std::make_unique<ParallelMapIterator>(stats, fn_, std::move(input), parallelism_, deterministic_,
                                                 std::move(batch_slots), ctx);
  }
  int64_t cardinality() const override { return input_->cardinality(); }
  std::string describe() const override {
    return fmt::format("{}(parallel={}, deterministic={})", name_,
                       parallelism_ == kAutotune ? std::string("autotune") : std::to_string(parallelism_),
                       deterministic_);
  }
  bool deterministic() const override { return deterministic_ || parallelism_ == 1; }

 private:
  MapFn fn_;
  int parallelism_;
  bool deterministic_;
  std::string name_;
};

}  // namespace

NodePtr make_map_node(NodePtr input, MapFn fn, int parallelism, bool deterministic, std::string name) {
  return std::make_shared<MapNode>(std::move(input), std::move(fn), parallelism, deterministic, std::move(name));
}

}  // namespace nimbus::data::detail
