#include "src/device/cuda/lazy_libraries.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <string>

#include "nimbus/base/error.h"

namespace nimbus::cuda {
namespace {

constexpr const char* kToolkitRemedy = "install the CUDA toolkit's libraries, or add their folder to LD_LIBRARY_PATH";

// By soname first (LD_LIBRARY_PATH, the library's run path), then in `folder` (where this build found it).
void* open_library(const std::string& soname, const char* what, const std::string& folder, const char* remedy) {
  void* library = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) library = dlopen((folder + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) throw Unavailable(fmt::format("cannot load {} ({}): {}", soname, what, dlerror()), remedy);
  return library;
}

// `needed` names the version this build was compiled against.
template <typename Function>
void bind(void* library, const char* name, const std::string& soname, const std::string& needed, Function& slot) {
  slot = reinterpret_cast<Function>(dlsym(library, name));
  if (slot == nullptr) {
    throw Unavailable(fmt::format("{} has no {}: it is older than the {} this build needs", soname, name, needed),
                      fmt::format("install {}", needed));
  }
}

}  // namespace

const CublasLtApi& cublaslt() {
  static const CublasLtApi api = [] {
    CublasLtApi functions;
    const std::string soname = fmt::format("libcublasLt.so.{}", CUBLAS_VER_MAJOR);
    void* library = open_library(soname, "cuBLASLt", NIMBUS_CUDA_LIBRARY_DIR, kToolkitRemedy);
    const std::string needed = fmt::format("CUDA {}", CUDART_VERSION / 1000);
#define NIMBUS_BIND(name) bind(library, #name, soname, needed, functions.name);
    NIMBUS_CUBLASLT_FUNCTIONS(NIMBUS_BIND)
    return functions;
  }();
  return api;
}

const NvrtcApi& nvrtc() {
  static const NvrtcApi api = [] {
    NvrtcApi functions;
    const std::string soname = fmt::format("libnvrtc.so.{}", CUDART_VERSION / 1000);
    const std::string needed = fmt::format("CUDA {}", CUDART_VERSION / 1000);
    void* library = open_library(soname, "NVRTC", NIMBUS_CUDA_LIBRARY_DIR, kToolkitRemedy);
    NIMBUS_NVRTC_FUNCTIONS(NIMBUS_BIND)
    return functions;
  }();
  return api;
}

const CudnnApi& cudnn() {
  static const CudnnApi api = [] {
    CudnnApi functions;
    const std::string soname = fmt::format("libcudnn.so.{}", CUDNN_MAJOR);
    const std::string needed = fmt::format("cuDNN {}", CUDNN_MAJOR);
    void* library =
        open_library(soname, "cuDNN, for convolution, pooling and batch norm on the GPU", NIMBUS_CUDNN_LIBRARY_DIR,
                     "install cuDNN 9 (Debian: NVIDIA's cudnn9-cuda-13 package; pip: nvidia-cudnn-cu13) or add its lib "
                     "folder to LD_LIBRARY_PATH");
    NIMBUS_CUDNN_FUNCTIONS(NIMBUS_BIND)
#undef NIMBUS_BIND
    return functions;
  }();
  return api;
}

}  // namespace nimbus::cuda
