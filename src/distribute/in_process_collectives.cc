// The in-process collectives: ranks are threads that meet at one rendezvous.
// The last rank to arrive does the collective for everyone (the others' buffers
// stay valid while they wait), in rank order, so every rank gets the same bits.
#include <fmt/format.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include "collective_timeout.h"
#include "nimbus/distribute/collectives.h"

namespace nimbus::distribute {

// One rank's side of the collective in progress.
struct Call {
  std::string name;
  size_t count = 0;  // floats (all_reduce, all_gather: per rank) or bytes (broadcast)
  void* buffer = nullptr;
  const void* send = nullptr;
  int root = 0;
  ReduceOp op = ReduceOp::kSum;
};

struct InProcessGroup::State {
  int size = 0;
  CollectiveOptions options;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<Call> calls;
  std::vector<bool> arrived;
  int arrivals = 0;
  int departures = 0;
  bool complete = false;  // the collective ran; ranks are leaving
  std::string abort_reason;

  // Runs the collective every rank has now called.
  void execute() {
    const Call& first = calls[0];
    if (first.name == "all_reduce") {
      std::vector<float> total(first.count, 0.0f);
      for (const Call& call : calls) {
        const auto* values = static_cast<const float*>(call.buffer);
        for (size_t i = 0; i < total.size(); ++i) total[i] += values[i];
      }
      if (first.op == ReduceOp::kMean) {
        for (float& value : total) value /= static_cast<float>(size);
      }
      for (const Call& call : calls) std::memcpy(call.buffer, total.data(), total.size() * sizeof(float));
    } else if (first.name == "broadcast") {
      const void* source = calls[static_cast<size_t>(first.root)].buffer;
      for (const Call& call : calls) {
        if (call.buffer != source) std::memcpy(call.buffer, source, call.count);
      }
    } else if (first.name == "all_gather") {
      for (const Call& receiver : calls) {
        for (size_t r = 0; r < calls.size(); ++r) {
          std::memcpy(static_cast<float*>(receiver.buffer) + r * first.count, calls[r].send,
                      first.count * sizeof(float));
        }
      }
    }
  }
};

class InProcessGroup::Member final : public Collectives {
 public:
  Member(std::shared_ptr<State> state, int rank) : state_(std::move(state)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return state_->size; }

  void all_reduce(std::span<float> buffer, ReduceOp op) override {
    run({.name = "all_reduce", .count = buffer.size(), .buffer = buffer.data(), .op = op});
  }
  void broadcast(std::span<std::byte> buffer, int root) override {
    if (root < 0 || root >= size()) {
      throw InvalidArgument(fmt::format("broadcast from rank {}: the group has ranks 0 .. {}", root, size() - 1));
    }
    run({.name = "broadcast", .count = buffer.size(), .buffer = buffer.data(), .root = root});
  }
  void all_gather(std::span<const float> send, std::span<float> receive) override {
    if (receive.size() != send.size() * static_cast<size_t>(size())) {
      throw InvalidArgument(fmt::format("all_gather of {} floats per rank over {} ranks needs {} floats, got {}",
                                        send.size(), size(), send.size() * static_cast<size_t>(size()),
                                        receive.size()));
    }
    run({.name = "all_gather", .count = send.size(), .buffer = receive.data(), .send = send.data()});
  }
  void barrier() override { run({.name = "barrier"}); }

 private:
  void run(const Call& call) {
    State& s = *state_;
    std::unique_lock lock(s.mutex);
    const auto deadline = std::chrono::steady_clock::now() + s.options.timeout;
    // The previous collective may still be letting its ranks go.
    if (!s.changed.wait_until(lock, deadline, [&] { return !s.complete || !s.abort_reason.empty(); })) {
      fail(lock, call.name, missing_departures());
    }
    check_not_aborted();
    if (s.arrivals > 0) check_matches(call);
    s.calls[static_cast<size_t>(rank_)] = call;
    s.arrived[static_cast<size_t>(rank_)] = true;
    if (++s.arrivals == s.size) {
      s.execute();
      s.complete = true;
      s.changed.notify_all();
    } else if (!s.changed.wait_until(lock, deadline, [&] { return s.complete || !s.abort_reason.empty(); })) {
      fail(lock, call.name, missing_arrivals());
    }
    if (!s.complete) check_not_aborted();
    if (++s.departures == s.size) {
      s.arrivals = s.departures = 0;
      s.complete = false;
      s.arrived.assign(static_cast<size_t>(s.size), false);
      s.changed.notify_all();
    }
  }

  std::vector<int> missing_arrivals() const {
    std::vector<int> missing;
    for (int r = 0; r < state_->size; ++r) {
      if (!state_->arrived[static_cast<size_t>(r)]) missing.push_back(r);
    }
    return missing;
  }
  // Ranks still in the previous collective cannot be told apart from here.
  static std::vector<int> missing_departures() { return {}; }

  [[noreturn]] void fail(std::unique_lock<std::mutex>& lock, const std::string& collective,
                         const std::vector<int>& missing) {
    CollectiveTimeout error =
        collective_timeout(collective, rank_, state_->size, missing, state_->options.timeout, context());
    if (state_->abort_reason.empty()) state_->abort_reason = error.message();
    state_->changed.notify_all();
    lock.unlock();
    throw error;
  }

  void check_not_aborted() const {
    if (!state_->abort_reason.empty()) {
      throw CollectiveTimeout(
          fmt::format("rank {}: the collective group was aborted: {}", rank_, state_->abort_reason));
    }
  }

  void check_matches(const Call& call) {
    for (int r = 0; r < state_->size; ++r) {
      if (!state_->arrived[static_cast<size_t>(r)]) continue;
      const Call& other = state_->calls[static_cast<size_t>(r)];
      if (other.name != call.name || other.count != call.count || other.root != call.root) {
        const std::string reason =
            fmt::format("rank {} called {} of {} elements while rank {} called {} of {} elements", rank_, call.name,
                        call.count, r, other.name, other.count);
        state_->abort_reason = reason;
        state_->changed.notify_all();
        throw InvalidArgument("mismatched collectives: " + reason,
                              "every rank must run the same collectives in the same order");
      }
      return;
    }
  }

  std::shared_ptr<State> state_;
  int rank_;
};

InProcessGroup::InProcessGroup(int size, CollectiveOptions options) : state_(std::make_shared<State>()) {
  if (size < 1) throw InvalidArgument(fmt::format("a collective group needs at least one rank, got {}", size));
  if (options.timeout.count() <= 0) {
    throw InvalidArgument(fmt::format("collective timeout {}ms: it must be positive", options.timeout.count()));
  }
  state_->size = size;
  state_->options = options;
  state_->calls.resize(static_cast<size_t>(size));
  state_->arrived.assign(static_cast<size_t>(size), false);
  for (int r = 0; r < size; ++r) members_.push_back(std::make_unique<Member>(state_, r));
}

InProcessGroup::~InProcessGroup() = default;

int InProcessGroup::size() const { return state_->size; }

Collectives& InProcessGroup::member(int rank) {
  if (rank < 0 || rank >= size()) {
    throw InvalidArgument(fmt::format("rank {} of a group of {}", rank, size()));
  }
  return *members_[static_cast<size_t>(rank)];
}

void InProcessGroup::abort(const std::string& reason) {
  std::lock_guard lock(state_->mutex);
  if (state_->abort_reason.empty()) state_->abort_reason = reason;
  state_->changed.notify_all();
}

bool InProcessGroup::aborted() const {
  std::lock_guard lock(state_->mutex);
  return !state_->abort_reason.empty();
}

}  // namespace nimbus::distribute
