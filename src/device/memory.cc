#include "nimbus/device/memory.h"

#include <fmt/format.h>

#include <cstdlib>

#include "nimbus/base/error.h"
#include "nimbus/base/size_units.h"
#include "nimbus/device/backend.h"
#include "nimbus/device/bfc_allocator.h"

namespace nimbus {

namespace {

constexpr const char* kModeHint = "write growth (the default: reserve on demand, give back on trim) or preallocate";

BfcAllocator& bfc_allocator_for(Device device) {
  Allocator& allocator = allocator_for(device);
  auto* bfc = dynamic_cast<BfcAllocator*>(&allocator);
  if (bfc == nullptr) {
    throw Unimplemented(
        fmt::format("device {}'s allocator ({}) has no memory modes", device.to_string(), allocator.name()));
  }
  return *bfc;
}

}  // namespace

MemoryMode parse_memory_mode(std::string_view text) {
  if (text == "growth") return MemoryMode::kGrowth;
  if (text == "preallocate") return MemoryMode::kPreallocate;
  throw InvalidArgument(fmt::format("'{}' is not a memory mode", text), kModeHint);
}

std::string_view memory_mode_name(MemoryMode mode) {
  return mode == MemoryMode::kPreallocate ? "preallocate" : "growth";
}

std::optional<uint64_t> parse_memory_limit(std::string_view text) {
  if (text == "none") return std::nullopt;
  const uint64_t limit = parse_size(text);
  if (limit == 0) {
    throw InvalidArgument(fmt::format("memory limit '{}' leaves no memory", text),
                          "give a size such as 12GiB, or none for no limit");
  }
  return limit;
}

void validate_memory_options(const MemoryOptions& options) {
  if (!(options.fraction > 0 && options.fraction <= 1)) {
    throw InvalidArgument(fmt::format("runtime.memory.fraction is {}; it must be in (0, 1]", options.fraction),
                          "give the share of the device's free memory that preallocate reserves, e.g. 0.9");
  }
  if (options.limit && *options.limit == 0) {
    throw InvalidArgument("runtime.memory.limit is 0, which leaves no memory", "give a size such as 12GiB, or none");
  }
}

MemoryOptions parse_memory_options(std::string_view mode, double fraction, std::string_view limit) {
  MemoryOptions options;
  try {
    options.mode = parse_memory_mode(mode);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("runtime.memory.mode: " + e.message(), e.hint());
  }
  try {
    options.limit = parse_memory_limit(limit);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("runtime.memory.limit: " + e.message(), e.hint());
  }
  options.fraction = fraction;
  validate_memory_options(options);
  return options;
}

MemoryOptions apply_memory_environment(MemoryOptions options) {
  if (const char* mode = std::getenv("NIMBUS_MEMORY_MODE")) {
    try {
      options.mode = parse_memory_mode(mode);
    } catch (const InvalidArgument&) {
      throw InvalidArgument(fmt::format("NIMBUS_MEMORY_MODE='{}' is not a memory mode", mode),
                            std::string(kModeHint) + ", or unset the variable");
    }
  }
  if (const char* limit = std::getenv("NIMBUS_MEMORY_LIMIT")) {
    try {
      options.limit = parse_memory_limit(limit);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("NIMBUS_MEMORY_LIMIT='{}': {}", limit, e.message()),
                            e.hint() + ", or unset the variable");
    }
  }
  return options;
}

void configure_memory(Device device, const MemoryOptions& options) {
  bfc_allocator_for(device).configure(apply_memory_environment(options));
}

MemoryOptions memory_options(Device device) { return bfc_allocator_for(device).options(); }

AllocatorStats memory_stats(Device device) { return allocator_for(device).stats(); }

uint64_t memory_capacity(Device device) { return bfc_allocator_for(device).capacity(); }

uint64_t trim_memory(Device device) { return bfc_allocator_for(device).trim(); }

bool reserve_memory(Device device, uint64_t bytes) { return bfc_allocator_for(device).reserve(bytes); }

std::string memory_summary(Device device) { return bfc_allocator_for(device).summary(); }

}  // namespace nimbus
