// What the CUDA backend offers beyond the Backend interface, to the rest of src/device/cuda/.
#pragma once

#include "nimbus/device/bfc_allocator.h"
#include "src/device/cuda/cuda_stream.h"

namespace nimbus::cuda {

// Device `device`'s copy stream, for host-to-device copies that overlap the compute stream
// (src/tensor/cuda/batch_uploader.h).
CudaStream& copy_stream(int device);
// Device `device`'s allocator, whose default stream is the compute stream: plain allocate / deallocate
// serve the kernels; work on the copy stream allocates with allocate(bytes, copy_stream(device)).
BfcAllocator& device_allocator(int device);

}  // namespace nimbus::cuda
