// Host pipeline memory: the input pipeline's data on the host (a data set loaded into memory, the
// pipeline's buffers, batches made on the host for a device), counted apart from device memory, which
// the device's allocator serves to the model and runtime.memory.limit caps. On the CPU both live in
// RAM and are still counted apart (DESIGN.md, "device memory"): the limit is the model's.
//
//   {
//     HostMemoryScope host;                      // this thread's new CPU tensors are host memory
//     images = data::read_idx(path).to(DType::kF32);
//   }
//   host_memory_stats().peak_bytes_in_use;       // the data set, pipeline buffers; not in memory_stats()
//   trim_host_memory();                          // hands cached free buffers back to the system
//
// The host allocator takes each block from the system (aligned_alloc, so large ones are mmap'd and
// untouched pages cost nothing) and keeps freed blocks by size, up to 256 MiB in all, for the next
// tensor of that size: a pipeline allocates the same sizes over and over, and faulting in fresh pages
// // costs more than decoding. Blocks under 64 KiB are kept on the thread that freed them (64 at most,
// the oldest making room), in 1 KiB steps from 4 KiB: through malloc, a few tiny aligned blocks per
// element (a traced map's window arithmetic) made the JPEG decode beside them ~20-30 us per image
// slower. trim_host_memory() frees the shared blocks and the calling thread's. It has no limit.
#pragma once

#include <cstdint>

#include "nimbus/device/allocator.h"
#include "nimbus/device/device.h"

namespace nimbus {

// While one is alive, new tensors this thread makes on the CPU come from the host allocator (scopes
// nest). Tensors on other devices, and other threads' tensors, are unaffected.
class HostMemoryScope {
 public:
  HostMemoryScope();
  ~HostMemoryScope();
  HostMemoryScope(const HostMemoryScope&) = delete;
  HostMemoryScope& operator=(const HostMemoryScope&) = delete;

  // Whether this thread is inside a scope now.
  static bool active();

 private:
  bool previous_;
};

// The allocator of host pipeline memory (one per process; never destroyed).
Allocator& host_allocator();
AllocatorStats host_memory_stats();
// Frees the host allocator's cached free blocks; returns the bytes freed.
uint64_t trim_host_memory();

// Where a new tensor on `device` takes its memory: the host allocator inside a HostMemoryScope on the
// CPU, else the device's allocator.
Allocator& allocator_for_new_tensor(Device device);

}  // namespace nimbus
