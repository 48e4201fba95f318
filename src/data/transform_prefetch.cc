// prefetch: a background thread runs the input ahead into a bounded buffer.
// With kAutotune the buffer grows while the consumer finds it empty, within a
// memory budget; stats() says what it chose and why.
#include <fmt/format.h>
#include <pthread.h>

#include <variant>

#include "nimbus/base/error.h"
#include "src/data/pipeline.h"

namespace nimbus::data::detail {
namespace {

// Host memory one autotuned prefetch buffer may hold.
constexpr int64_t kAutotuneBufferBudgetBytes = int64_t{256} << 20;
constexpr int64_t kAutotuneMaxBuffer = 64;
// Consumer calls between two autotune decisions.
constexpr int kAutotuneWindow = 8;

struct EndOfInput {};
using Slot = std::variant<Element, std::exception_ptr, EndOfInput>;

class PrefetchIterator : public IteratorImpl {
 public:
  PrefetchIterator(std::unique_ptr<IteratorImpl> input, std::shared_ptr<NodeStats> stats, int64_t buffer_size,
                   std::shared_ptr<std::atomic<bool>> cancelled)
      : IteratorImpl(std::move(stats), /*asynchronous=*/true),
        input_(std::move(input)),
        autotune_(buffer_size == kAutotune),
        capacity_(buffer_size == kAutotune ? 1 : buffer_size),
        cancelled_(std::move(cancelled)) {
    this->stats().buffer_capacity = capacity_;
    this->stats().autotuned = autotune_;
    if (autotune_) this->stats().set_note("autotune: buffer starts at 1");
    thread_ = std::thread([this] { produce(); });
  }

  ~PrefetchIterator() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    stats().buffer_bytes -= bytes_;
  }

  std::optional<Element> get_next() override {
    std::unique_lock lock(mutex_);
    bool waited = false;
    if (buffer_.empty()) {
      waited = true;
      wait_unless_cancelled(lock, cv_, *cancelled_, [this] { return !buffer_.empty(); });
    }
    if (autotune_) tune(waited, lock);
    if (std::holds_alternative<EndOfInput>(buffer_.front())) return std::nullopt;
    Slot slot = std::move(buffer_.front());
    buffer_.pop_front();
    stats().buffer_fill = static_cast<int64_t>(buffer_.size());
    lock.unlock();
    cv_.notify_all();
    if (auto* error = std::get_if<std::exception_ptr>(&slot)) std::rethrow_exception(*error);
    Element element = std::move(std::get<Element>(slot));
    const int64_t bytes = element_bytes(element);
    bytes_ -= bytes;
    stats().buffer_bytes -= bytes;
    return element;
  }

 private:
  void produce() {
    pthread_setname_np(pthread_self(), "nimbus-prefetch");  // for the monitor's per-thread CPU
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        if (static_cast<int64_t>(buffer_.size()) >= capacity_) producer_blocked_ = true;
        cv_.wait(lock, [this] { return stop_ || static_cast<int64_t>(buffer_.size()) < capacity_; });
        if (stop_) return;
      }
      Slot slot;
      const int64_t start = now_ns();
      try {
        std::optional<Element> element = input_->next();
        if (element) {
          const int64_t bytes = element_bytes(*element);
          bytes_ += bytes;
          stats().buffer_bytes += bytes;
          last_element_bytes_ = bytes;
          slot = std::move(*element);
        } else {
          slot = EndOfInput{};
        }
      } catch (const IterationCancelled&) {
        return;
      } catch (...) {
        slot = std::current_exception();
      }
      stats().input_wait_ns += now_ns() - start;
      const bool end = std::holds_alternative<EndOfInput>(slot);
      {
        std::lock_guard lock(mutex_);
        buffer_.push_back(std::move(slot));
        stats().buffer_fill = static_cast<int64_t>(buffer_.size());
      }
      cv_.notify_all();
      if (end) return;
    }
  }

  // Grows the buffer when the consumer keeps finding it empty. The producer
  // runs as fast as its input allows; a deeper buffer absorbs the input's
  // bursts (a batch that takes longer, a file switch) so the step never sees
  // them. Shrinks never: memory is bounded by the budget instead.
  void tune(bool waited, std::unique_lock<std::mutex>&) {
    window_calls_++;
    if (waited) window_waits_++;
    if (window_calls_ < kAutotuneWindow) return;
    const int64_t element = std::max<int64_t>(1, last_element_bytes_.load());
    const int64_t memory_cap = std::max<int64_t>(1, kAutotuneBufferBudgetBytes / element);
    const int64_t cap = std::min(kAutotuneMaxBuffer, memory_cap);
    std::string why;
    if (window_waits_ > 0 && !producer_blocked_) {
      // The producer never paused on a full buffer: the input is slower than
      // the consumer on average, and a deeper buffer would only hold memory.
      why = fmt::format(
          "consumer found the buffer empty in {} of the last {} calls, but the input never filled it: "
          "the input is the bottleneck (raise its parallelism)",
          window_waits_, window_calls_);
    } else if (window_waits_ > 0 && capacity_ < cap) {
      capacity_ = std::min(cap, capacity_ * 2);
      why = fmt::format(
          "consumer found the buffer empty in {} of the last {} calls while the input had paused on a "
          "full buffer: bursts, so deeper",
          window_waits_, window_calls_);
    } else if (window_waits_ > 0) {
      why = fmt::format(
          "at its cap: {} elements of {} KiB within {} MiB, or {} max; the input is slower than the "
          "consumer, raise its parallelism",
          cap, element / 1024, kAutotuneBufferBudgetBytes >> 20, kAutotuneMaxBuffer);
    } else {
      why = fmt::format("consumer never waited in the last {} calls", window_calls_);
    }
    stats().buffer_capacity = capacity_;
    stats().set_note(fmt::format("autotune: buffer {} — {}", capacity_, why));
    window_calls_ = 0;
    window_waits_ = 0;
    producer_blocked_ = false;
    cv_.notify_all();
  }

  std::unique_ptr<IteratorImpl> input_;
  const bool autotune_;
  int64_t capacity_;
  std::shared_ptr<std::atomic<bool>> cancelled_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Slot> buffer_;
  bool stop_ = false;
  bool producer_blocked_ = false;  // guarded by mutex_; reset each autotune window
  std::atomic<int64_t> bytes_{0};
  std::atomic<int64_t> last_element_bytes_{0};
  int window_calls_ = 0, window_waits_ = 0;
  std::thread thread_;
};

class PrefetchNode : public UnaryNode {
 public:
  PrefetchNode(NodePtr input, int64_t buffer_size) : UnaryNode(std::move(input)), buffer_size_(buffer_size) {}
  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    auto stats = node_stats(ctx, "prefetch");
    return make_prefetch_iterator(make_input_iterator(*input_, ctx), stats, buffer_size_, ctx.cancelled);
  }
  int64_t cardinality() const override { return input_->cardinality(); }
  std::string describe() const override {
    return buffer_size_ == kAutotune ? std::string("prefetch(autotune)") : fmt::format("prefetch({})", buffer_size_);
  }

 private:
  int64_t buffer_size_;
};

}  // namespace

std::unique_ptr<IteratorImpl> make_prefetch_iterator(std::unique_ptr<IteratorImpl> input,
                                                     std::shared_ptr<NodeStats> stats, int64_t buffer_size,
                                                     std::shared_ptr<std::atomic<bool>> cancelled) {
  return std::make_unique<PrefetchIterator>(std::move(input), std::move(stats), buffer_size, std::move(cancelled));
}

NodePtr make_prefetch_node(NodePtr input, int64_t buffer_size) {
  return std::make_shared<PrefetchNode>(std::move(input), buffer_size);
}

}  // namespace nimbus::data::detail
