// Device memory: how each device's allocator reserves memory (the
// runtime.memory keys of configs), and the per-device controls.
//
//   configure_memory(Device::cuda(0), parse_memory_options("growth", 0.9, "12GiB"));
//   memory_stats(Device::cpu()).peak_bytes_in_use;
//   std::cout << memory_summary(Device::cpu());   // a table like PyTorch's memory_summary
//   trim_memory(Device::cpu());                   // hands fully free regions back
//
// Modes (docs/memory.md says which to use when):
//   growth (the default): regions are obtained on demand, each as large as
//     everything already held (so the reservation doubles), and kept for
//     reuse until trim_memory() hands the fully free ones back.
//   preallocate: one region of `fraction` of the device's free memory, taken
//     when the mode is configured; the allocator never reserves more.
// `limit` caps what the allocator reserves in either mode, so that several
// processes can share one device.
//
// The environment overrides the API and configs (for containers):
//   NIMBUS_MEMORY_MODE=growth|preallocate   NIMBUS_MEMORY_LIMIT=12GiB (or a byte count, or "none")
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "nimbus/device/allocator.h"
#include "nimbus/device/device.h"

namespace nimbus {

enum class MemoryMode : uint8_t { kGrowth, kPreallocate };

struct MemoryOptions {
  MemoryMode mode = MemoryMode::kGrowth;
  // preallocate: the share of the device's free memory to reserve, in (0, 1].
  // On the CPU, free memory is MemAvailable from /proc/meminfo.
  double fraction = 0.9;
  // The most the allocator reserves, in bytes; none when empty.
  std::optional<uint64_t> limit = std::nullopt;
};

// "growth" or "preallocate"; anything else throws InvalidArgument naming the text.
MemoryMode parse_memory_mode(std::string_view text);
std::string_view memory_mode_name(MemoryMode mode);
// A size ("12GiB", "1.5 GB", "4096") or "none"; throws InvalidArgument for a
// malformed size or zero.
std::optional<uint64_t> parse_memory_limit(std::string_view text);
// The runtime.memory keys as a config gives them; throws InvalidArgument naming the bad key.
MemoryOptions parse_memory_options(std::string_view mode, double fraction, std::string_view limit);
// Throws InvalidArgument when a field is out of range (fraction outside (0, 1], limit 0).
void validate_memory_options(const MemoryOptions& options);
// `options` with NIMBUS_MEMORY_MODE and NIMBUS_MEMORY_LIMIT applied where set;
// a bad value throws InvalidArgument naming the variable and the value.
MemoryOptions apply_memory_environment(MemoryOptions options);

// Applies `options`, overridden by the environment, to the device's allocator:
// fully free regions are handed back first; preallocate then reserves its
// region (OutOfMemory when the device refuses it). A limit below what live
// tensors hold takes effect as they are freed.
void configure_memory(Device device, const MemoryOptions& options);
// The options in effect on the device (after environment overrides).
MemoryOptions memory_options(Device device);
AllocatorStats memory_stats(Device device);
// The most bytes live tensors could hold on the device together (BfcAllocator::capacity).
uint64_t memory_capacity(Device device);
// Hands the device's fully free regions back to the system; returns the bytes
// released. Preallocate mode keeps its region.
uint64_t trim_memory(Device device);
// Makes one free block of `bytes` on the device for allocations that take it in pieces
// (BfcAllocator::reserve); returns whether there is one.
bool reserve_memory(Device device, uint64_t bytes);
std::string memory_summary(Device device);

}  // namespace nimbus
