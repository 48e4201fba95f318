#include "nimbus/train/assumed_devices.h"

#include <fmt/format.h>

#include <algorithm>

namespace nimbus::train {

std::string AssumedDevices::to_string() const {
  return fmt::format("{}{} x {} ({:.1f} GB each, compute capability {:.1f})",
                     nodes > 1 ? fmt::format("{} nodes x ", nodes) : std::string(), count, name,
                     static_cast<double>(memory_bytes) / 1e9, compute_capability);
}

uint64_t AssumedDevices::capacity(const MemoryOptions& options) const {
  uint64_t bytes = memory_bytes;
  if (options.mode == MemoryMode::kPreallocate) {
    bytes = static_cast<uint64_t>(options.fraction * static_cast<double>(memory_bytes));
  }
  return options.limit ? std::min(*options.limit, bytes) : bytes;
}

}  // namespace nimbus::train
