// Helpers for the allocator tests: a sub-allocator that hands out address
// ranges without memory behind them (the BFC allocator never touches the
// memory it manages), and the recorded training trace.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nimbus/device/bfc_allocator.h"
#include "nimbus/device/memory_trace.h"
#include "nimbus/device/stream.h"

namespace nimbus::testing {

// Address ranges from a made-up address space, at most `capacity` bytes at a
// time (a device of that size); counts the calls.
class FakeSubAllocator final : public SubAllocator {
 public:
  struct Counts {
    int allocations = 0;
    int frees = 0;
    int refusals = 0;
    uint64_t held = 0;
  };

  explicit FakeSubAllocator(uint64_t capacity = uint64_t{1} << 40, std::shared_ptr<Counts> counts = nullptr);
  std::string name() const override { return "fake address ranges"; }
  void* allocate_region(size_t bytes) override;
  void free_region(void* ptr, size_t bytes) override;
  uint64_t free_memory() const override { return capacity_ - counts_->held; }
  // Shared with the test, which keeps reading them after the allocator owns this sub-allocator.
  std::shared_ptr<Counts> counts() const { return counts_; }

 private:
  uint64_t capacity_;
  uintptr_t next_ = uintptr_t{1} << 44;
  std::shared_ptr<Counts> counts_;
  std::map<uintptr_t, size_t> regions_;
};

// A stream whose queued work finishes only when the test says (finish, finish_to): its events stay
// incomplete until then, as a GPU's do while its kernels run, and synchronizing on one finishes the
// stream up to it. A CUDA event cannot run on this machine (no GPU); tests/gpu/stream_order_test.cc
// checks the allocator with real ones. Completion is atomic, so other threads may query and wait;
// record() and wait() belong to one thread at a time.
class QueuedStream final : public Stream {
 public:
  struct QueuedEvent final : Event {
    const QueuedStream* stream = nullptr;
    int64_t position = 0;  // the stream's work before the event
    mutable std::atomic<int> waits{0};
    bool query() const override { return stream->finished() >= position; }
    void synchronize() const override {
      ++waits;
      stream->finish_to(position);
    }
  };

  Device device() const override { return Device::cpu(); }
  void synchronize() override { finish(); }
  std::shared_ptr<Event> record() override;
  // Remembers the event (waited_for); the queue itself runs in order anyway.
  void wait(const Event& event) override;
  void finish() { finish_to(enqueued_); }
  void finish_to(int64_t position) const;
  int64_t enqueued() const { return enqueued_; }
  int64_t finished() const { return finished_.load(); }

  std::vector<std::shared_ptr<QueuedEvent>> events;  // every event recorded, in order
  const QueuedEvent* waited_for = nullptr;           // the last event wait() was given

 private:
  int64_t enqueued_ = 0;
  mutable std::atomic<int64_t> finished_{0};
};

// The MLP training trace committed with the tests (tests/memory/data/README.md).
const MemoryTrace& mlp_trace();

// Replays `trace` on `allocator` (every allocation freed by the end), calling
// `before_event` with each event's index first; returns the allocator's peak
// of bytes in use.
uint64_t replay(Allocator& allocator, const MemoryTrace& trace, const std::function<void(size_t)>& before_event = {});

}  // namespace nimbus::testing
