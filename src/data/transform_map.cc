// map: fn on each element. Sequential on the consumer's thread, or parallel:
// a runner thread pulls input elements and hands each call to the pipeline's
// thread pool; results come back in input order (deterministic) or as they
// finish. With kAutotune the number of calls in flight follows the measured
// time per call and the consumer's demand (see tune()).
#include <fmt/format.h>
#include <pthread.h>

#include <cmath>

#include "nimbus/base/error.h"
#include "src/data/pipeline.h"

namespace nimbus::data::detail {
namespace {

constexpr int kAutotuneWindow = 8;  // consumer calls between two decisions
constexpr double kEmaWeight = 0.2;

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

// One call in flight or done. Shared with the pool task, so a task that
// finishes after its iterator is gone writes into a slot nobody reads.
struct Call {
  bool done = false;
  std::optional<Element> result;
  std::exception_ptr error;
};

// What pool tasks touch: owned jointly, so a task still running after its
// iterator is destroyed stays safe.
struct Shared {
  std::mutex mutex;
  std::condition_variable cv;
  MapFn fn;
  std::shared_ptr<NodeStats> stats;
  double fn_time_ema_ns = 0;  // guarded by mutex
};

class ParallelMapIterator : public IteratorImpl {
 public:
  ParallelMapIterator(std::shared_ptr<NodeStats> stats, MapFn fn, std::unique_ptr<IteratorImpl> input, int parallelism,
                      bool deterministic, IteratorContext& ctx)
      : IteratorImpl(std::move(stats), /*asynchronous=*/true),
        input_(std::move(input)),
        autotune_(parallelism == kAutotune),
        deterministic_(deterministic),
        cores_(ctx.cores),
        pool_(ctx.pool),
        cancelled_(ctx.cancelled),
        shared_(std::make_shared<Shared>()) {
    shared_->fn = std::move(fn);
    shared_->stats = stats_shared();
    parallelism_ = autotune_ ? 1 : parallelism;
    this->stats().parallelism = parallelism_;
    this->stats().autotuned = autotune_;
    this->stats().buffer_capacity = parallelism_;
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
    }
    shared_->cv.notify_all();
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
      wait_unless_cancelled(lock, shared_->cv, *cancelled_, ready);
    }
    stats().buffer_fill = static_cast<int64_t>(calls_.size());
    if (autotune_) tune(waited, static_cast<double>(now_ns() - arrived));
    lock.unlock();
    shared_->cv.notify_all();
    last_return_ns_ = now_ns();
    if (!call) return std::nullopt;
    if (call->error) std::rethrow_exception(call->error);
    return std::move(call->result);
  }

 private:
  static double ema(double old, double sample) { return old <= 0 ? sample : old + kEmaWeight * (sample - old); }

  void run() {
    pthread_setname_np(pthread_self(), "nimbus-map");  // for the monitor's per-thread CPU
    for (;;) {
      {
        std::unique_lock lock(shared_->mutex);
        shared_->cv.wait(lock, [this] { return stop_ || static_cast<int>(calls_.size()) < parallelism_; });
        if (stop_) return;
      }
      auto call = std::make_shared<Call>();
      std::optional<Element> element;
      const int64_t start = now_ns();
      try {
        element = input_->next();
      } catch (const IterationCancelled&) {
        return;
      } catch (...) {
        call->error = std::current_exception();
        call->done = true;
      }
      stats().input_wait_ns += now_ns() - start;
      std::lock_guard lock(shared_->mutex);
      if (!call->done && !element) {
        input_done_ = true;
        shared_->cv.notify_all();
        return;
      }
      calls_.push_back(call);
      if (call->done) {
        call.reset();  // the consumer's reference is the last: it frees the exception
        shared_->cv.notify_all();
        continue;
      }
      pool_->submit([call = std::move(call), shared = shared_, element = std::move(*element)]() mutable {
        const int64_t begin = now_ns();
        std::optional<Element> result;
        std::exception_ptr error;
        try {
          result = shared->fn(element);
        } catch (...) {
          error = std::current_exception();
        }
        const int64_t took = now_ns() - begin;
        shared->stats->busy_ns += took;
        std::lock_guard lock(shared->mutex);
        shared->fn_time_ema_ns = ema(shared->fn_time_ema_ns, static_cast<double>(took));
        call->result = std::move(result);
        call->error = std::move(error);
        call->done = true;
        // Let go of the call here, under the lock: the consumer then owns the
        // last reference and frees the result (or exception) on its thread.
        call.reset();
        shared->cv.notify_all();
      });
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
    int target = parallelism_;
    const int estimate = static_cast<int>(std::ceil(needed));
    // Waits shorter than 5% of the window are thread hand-offs, not a
    // shortage of calls in flight.
    const double window_ns = std::max(1.0, static_cast<double>(now_ns() - window_start_ns_));
    const double wait_share = window_wait_ns_ / window_ns;
    if (wait_share > 0.05)
      target = std::max(parallelism_ + 1, estimate);
    else if (estimate + 1 < parallelism_)
      target = parallelism_ - 1;
    target = std::clamp(target, 1, cores_);
    stats().set_note(fmt::format(
        "autotune: {} in flight — a call takes {:.3f} ms, the consumer asks every {:.3f} ms "
        "→ needs {:.1f}; consumer waited in {} of the last {} calls ({:.0f}% of the time); cap {} cores",
        target, fn_time / 1e6, gap / 1e6, needed, window_waits_, window_calls_, 100.0 * wait_share, cores_));
    parallelism_ = target;
    stats().parallelism = target;
    stats().buffer_capacity = target;
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
  std::deque<std::shared_ptr<Call>> calls_;
  int parallelism_ = 1;
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
    auto input = make_input_iterator(*input_, ctx);
    if (parallelism_ == 1) return std::make_unique<SequentialMapIterator>(stats, &fn_, std::move(input));
    return std::make_unique<ParallelMapIterator>(stats, fn_, std::move(input), parallelism_, deterministic_, ctx);
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
