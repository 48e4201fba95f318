#include "nimbus/device/allocator.h"

namespace nimbus {

void AllocationCounters::on_allocate(size_t bytes) {
  const uint64_t now = in_use_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  uint64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  count_.fetch_add(1, std::memory_order_relaxed);
}

void AllocationCounters::on_deallocate(size_t bytes) { in_use_.fetch_sub(bytes, std::memory_order_relaxed); }

AllocatorStats AllocationCounters::snapshot() const {
  AllocatorStats stats;
  stats.bytes_in_use = in_use_.load(std::memory_order_relaxed);
  stats.peak_bytes_in_use = peak_.load(std::memory_order_relaxed);
  stats.bytes_reserved = stats.bytes_in_use;
  stats.num_allocations = count_.load(std::memory_order_relaxed);
  return stats;
}

void AllocationCounters::reset_peak() { peak_.store(in_use_.load(std::memory_order_relaxed)); }

}  // namespace nimbus
