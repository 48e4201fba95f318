#include "src/kernels/cuda/tf32.h"

#include <cstdlib>
#include <string>

#include "nimbus/device/runtime.h"

namespace nimbus::cuda {

bool tf32_allowed() {
  static const bool by_environment = [] {
    const char* value = std::getenv("NIMBUS_CUDA_TF32");
    return value != nullptr && std::string(value) == "1";
  }();
  return by_environment || runtime_options().allow_tf32;
}

}  // namespace nimbus::cuda
