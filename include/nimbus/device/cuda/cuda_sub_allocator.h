// Where the BFC allocator gets a CUDA device's regions: cudaMalloc and
// cudaFree, with the device's free memory from cudaMemGetInfo (what
// preallocate takes its fraction of). Built only with -DNIMBUS_CUDA=ON and
// the CUDA toolkit found (cmake/NimbusOptions.cmake); the CUDA backend, when
// it exists, gives each device
//
//   BfcAllocator allocator("cuda:0", make_cuda_sub_allocator(0), options);
//
// A refused cudaMalloc (cudaErrorMemoryAllocation) returns null, so the BFC
// allocator can trim and retry, or raise OutOfMemory with its statistics;
// any other CUDA error throws Unavailable with the call and the error's name.
#pragma once

#include <memory>

#include "nimbus/device/bfc_allocator.h"

namespace nimbus {

std::unique_ptr<SubAllocator> make_cuda_sub_allocator(int device);

}  // namespace nimbus
