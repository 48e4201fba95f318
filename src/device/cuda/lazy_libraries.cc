#include "src/device/cuda/lazy_libraries.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <string>

#include "nimbus/base/error.h"

namespace nimbus::cuda {
namespace {

// By soname first (LD_LIBRARY_PATH, the library's run path), then in the toolkit this was built with.
void* open_library(const std::string& soname, const char* what) {
  void* library = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr)
    library = dlopen((std::string(NIMBUS_CUDA_LIBRARY_DIR) + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    throw Unavailable(fmt::format("cannot load {} ({}): {}", soname, what, dlerror()),
                      "install the CUDA toolkit's libraries, or add their folder to LD_LIBRARY_PATH");
  }
  return library;
}

template <typename Function>
void bind(void* library, const char* name, const std::string& soname, Function& slot) {
  slot = reinterpret_cast<Function>(dlsym(library, name));
  if (slot == nullptr) {
    throw Unavailable(
        fmt::format("{} has no {}: it is older than the CUDA {} this build needs", soname, name, CUDART_VERSION / 1000),
        "install the CUDA toolkit Nimbus was built with");
  }
}

}  // namespace

const CublasLtApi& cublaslt() {
  static const CublasLtApi api = [] {
    CublasLtApi functions;
    const std::string soname = fmt::format("libcublasLt.so.{}", CUBLAS_VER_MAJOR);
    void* library = open_library(soname, "cuBLASLt");
#define NIMBUS_BIND(name) bind(library, #name, soname, functions.name);
    NIMBUS_CUBLASLT_FUNCTIONS(NIMBUS_BIND)
    return functions;
  }();
  return api;
}

const NvrtcApi& nvrtc() {
  static const NvrtcApi api = [] {
    NvrtcApi functions;
    const std::string soname = fmt::format("libnvrtc.so.{}", CUDART_VERSION / 1000);
    void* library = open_library(soname, "NVRTC");
    NIMBUS_NVRTC_FUNCTIONS(NIMBUS_BIND)
#undef NIMBUS_BIND
    return functions;
  }();
  return api;
}

}  // namespace nimbus::cuda
