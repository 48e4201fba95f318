#include "nimbus/device/allocator.h"

namespace nimbus {

namespace {
// Read on every allocation: the initial-exec model makes that a plain load
// instead of a __tls_get_addr call (libnimbus is linked, not dlopen'ed, by
// its programs; glibc keeps room for a byte of it even when dlopen'ed).
[[gnu::tls_model("initial-exec")]] thread_local MemoryTag current_tag = MemoryTag::kUntagged;
}  // namespace

std::string_view memory_tag_name(MemoryTag tag) {
  switch (tag) {
    case MemoryTag::kUntagged: return "untagged";
    case MemoryTag::kParameters: return "parameters";
    case MemoryTag::kGradients: return "gradients";
    case MemoryTag::kOptimizerSlots: return "optimizer slots";
    case MemoryTag::kActivations: return "activations";
    case MemoryTag::kWorkspace: return "workspace";
    case MemoryTag::kInputBatches: return "input batches";
  }
  return "?";
}

AllocationTagScope::AllocationTagScope(MemoryTag tag) : previous_(current_tag) { current_tag = tag; }
AllocationTagScope::~AllocationTagScope() { current_tag = previous_; }
MemoryTag AllocationTagScope::current() { return current_tag; }

double AllocatorStats::fragmentation() const {
  const uint64_t free = free_bytes();
  if (free == 0) return 0.0;
  return 1.0 - static_cast<double>(largest_free_block) / static_cast<double>(free);
}

}  // namespace nimbus
