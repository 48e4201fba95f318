// What the CUDA backend offers beyond the Backend interface, to the rest of src/device/cuda/.
#pragma once

#include "src/device/cuda/cuda_stream.h"

namespace nimbus::cuda {

// Device `device`'s copy stream, for host-to-device copies that overlap the compute stream (batch_uploader.h).
CudaStream& copy_stream(int device);

}  // namespace nimbus::cuda
