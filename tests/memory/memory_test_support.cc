#include "memory_test_support.h"

#include "nimbus/base/error.h"

namespace nimbus::testing {

std::shared_ptr<Event> QueuedStream::record() {
  auto event = std::make_shared<QueuedEvent>();
  event->stream = this;
  event->position = ++enqueued_;
  events.push_back(event);
  return event;
}

void QueuedStream::wait(const Event& event) {
  waited_for = dynamic_cast<const QueuedEvent*>(&event);
  NIMBUS_ASSERT(waited_for != nullptr) << "a queued stream waits only on queued streams' events";
}

void QueuedStream::finish_to(int64_t position) const {
  int64_t finished = finished_.load();
  while (finished < position && !finished_.compare_exchange_weak(finished, position)) {
  }
}

FakeSubAllocator::FakeSubAllocator(uint64_t capacity, std::shared_ptr<Counts> counts)
    : capacity_(capacity), counts_(counts ? std::move(counts) : std::make_shared<Counts>()) {}

void* FakeSubAllocator::allocate_region(size_t bytes) {
  if (bytes > capacity_ - counts_->held) {
    ++counts_->refusals;
    return nullptr;
  }
  // 2 MiB-aligned with a gap of at least 2 MiB after each region, so that
  // neighbouring regions are never mistaken for one.
  constexpr size_t kStep = size_t{2} << 20;
  const uintptr_t base = next_;
  next_ += (bytes + 2 * kStep - 1) / kStep * kStep;
  regions_[base] = bytes;
  counts_->held += bytes;
  ++counts_->allocations;
  return reinterpret_cast<void*>(base);
}

void FakeSubAllocator::free_region(void* ptr, size_t bytes) {
  const auto it = regions_.find(reinterpret_cast<uintptr_t>(ptr));
  NIMBUS_ASSERT(it != regions_.end() && it->second == bytes) << "free_region of a region never handed out";
  regions_.erase(it);
  counts_->held -= bytes;
  ++counts_->frees;
}

const MemoryTrace& mlp_trace() {
  static const MemoryTrace trace = read_memory_trace(NIMBUS_MEMORY_TRACE);
  return trace;
}

uint64_t replay(Allocator& allocator, const MemoryTrace& trace, const std::function<void(size_t)>& before_event) {
  std::vector<std::pair<void*, size_t>> live(trace.allocations(), {nullptr, 0});
  for (size_t i = 0; i < trace.events.size(); ++i) {
    if (before_event) before_event(i);
    const MemoryTraceEvent& event = trace.events[i];
    if (event.allocate) {
      AllocationTagScope tag(event.tag);
      live[event.id] = {allocator.allocate(event.bytes), event.bytes};
    } else {
      allocator.deallocate(live[event.id].first, live[event.id].second);
      live[event.id].first = nullptr;
    }
  }
  for (const auto& [ptr, bytes] : live) {
    if (ptr != nullptr) allocator.deallocate(ptr, bytes);
  }
  return allocator.stats().peak_bytes_in_use;
}

}  // namespace nimbus::testing
