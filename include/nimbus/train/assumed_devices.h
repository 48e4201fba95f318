// The GPUs a dry run checks a config against instead of this machine's (`nimbus train CONFIG
// --dry-run --assume-devices 4xA100-80GB`): a plan is made on a laptop for a cloud, and checked there
// before any GPU is rented; `2x8xH100` assumes 2 nodes of 8 each. The count, memory and capabilities
// come from the planner's GPU catalog (plan/assumed_devices.h reads the flag); the train layer only
// checks against them:
//
//   runtime.device cuda:N       needs N < count (a node's)
//   runtime.strategy            mirrored over its listed GPUs (each below count) or all count of them;
//                               multi_worker_mirrored one process per GPU: nodes x count replicas
//   runtime.precision           mixed_bfloat16 needs bfloat16 tensor cores (compute capability 8.0 on)
//   the memory check            measures the traced step against one device's memory, capped by
//                               runtime.memory (limit; fraction in preallocate mode) and NIMBUS_MEMORY_*,
//                               at one replica's share of the global batch
//
// The step is traced on the CPU (tracing reads shapes only): its estimate is the device's.
#pragma once

#include <cstdint>
#include <string>

#include "nimbus/device/device_choice.h"
#include "nimbus/device/memory.h"

namespace nimbus::train {

struct AssumedDevices {
  int nodes = 1;
  int count = 1;              // GPUs of each node
  std::string name;           // the catalog's full name: "A100-SXM4-80GB"
  uint64_t memory_bytes = 0;  // each device's
  double compute_capability = 0;
  bool bfloat16 = false;  // tensor cores that run bfloat16

  // "4 x A100-SXM4-80GB (80.0 GB each, compute capability 8.0)", "2 nodes x 4 x ..." for messages.
  std::string to_string() const;
  // What the allocator could hand out on one device under `options` (the config's runtime.memory
  // with the environment's overrides): the memory, a preallocated fraction of it, or the limit.
  uint64_t capacity(const MemoryOptions& options) const;
  // The machine as runtime.device's choice sees it: a CUDA build with these GPUs (auto takes cuda:0).
  GpuProbe probe() const { return {.cuda_backend = true, .gpu_count = count}; }
};

}  // namespace nimbus::train
