// Helpers for the allocator tests: a sub-allocator that hands out address
// ranges without memory behind them (the BFC allocator never touches the
// memory it manages), and the recorded training trace.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "nimbus/device/bfc_allocator.h"
#include "nimbus/device/memory_trace.h"

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

// The MLP training trace committed with the tests (tests/memory/data/README.md).
const MemoryTrace& mlp_trace();

// Replays `trace` on `allocator` (every allocation freed by the end), calling
// `before_event` with each event's index first; returns the allocator's peak
// of bytes in use.
uint64_t replay(Allocator& allocator, const MemoryTrace& trace, const std::function<void(size_t)>& before_event = {});

}  // namespace nimbus::testing
