#include "src/kernels/cuda/kernel_cache.h"

#include <fmt/format.h>
#include <nvrtc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "nimbus/base/error.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/lazy_libraries.h"

namespace nimbus::cuda {
namespace {

// Destroys an NVRTC program however the compile ends.
struct ProgramGuard {
  nvrtcProgram program = nullptr;
  ~ProgramGuard() {
    if (program != nullptr) (void)nvrtc().nvrtcDestroyProgram(&program);
  }
};

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Written to a temporary name and renamed, so a concurrent reader never sees half a file.
// A cache that cannot be written only costs a compile next time, so failures are ignored.
void write_file_atomically(const std::filesystem::path& path, const std::string& bytes) {
  std::error_code error;
  std::filesystem::create_directories(path.parent_path(), error);
  const std::filesystem::path temporary = path.string() + fmt::format(".{}.tmp", getpid());
  {
    std::ofstream out(temporary, std::ios::binary);
    if (!out) return;
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) return;
  }
  std::filesystem::rename(temporary, path, error);
  if (error) std::filesystem::remove(temporary, error);
}

}  // namespace

std::string nvrtc_compile(const std::string& source, const std::string& name, const std::string& arch) {
  ProgramGuard guard;
  NIMBUS_NVRTC_CHECK(
      nvrtc().nvrtcCreateProgram(&guard.program, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr));
  const std::string arch_option = "--gpu-architecture=" + arch;
  // IEEE division and square root, no flush to zero: the CPU reference's numerics.
  const char* options[] = {arch_option.c_str(), "--std=c++17", "--ftz=false", "--prec-div=true", "--prec-sqrt=true"};
  const nvrtcResult compiled = nvrtc().nvrtcCompileProgram(guard.program, std::size(options), options);
  if (compiled != NVRTC_SUCCESS) {
    size_t log_size = 0;
    NIMBUS_NVRTC_CHECK(nvrtc().nvrtcGetProgramLogSize(guard.program, &log_size));
    std::string log(log_size, '\0');
    NIMBUS_NVRTC_CHECK(nvrtc().nvrtcGetProgramLog(guard.program, log.data()));
    while (!log.empty() && log.back() == '\0') log.pop_back();
    throw InternalError(fmt::format("NVRTC could not compile {} for {}: {}\n{}\n--- source ---\n{}", name, arch,
                                    nvrtc().nvrtcGetErrorString(compiled), log, source),
                        "this is a bug in the fused kernel generator; runtime.jit: false runs without it");
  }
  const bool cubin = arch.starts_with("sm_");
  size_t size = 0;
  std::string image;
  if (cubin) {
    NIMBUS_NVRTC_CHECK(nvrtc().nvrtcGetCUBINSize(guard.program, &size));
    image.resize(size);
    NIMBUS_NVRTC_CHECK(nvrtc().nvrtcGetCUBIN(guard.program, image.data()));
  } else {
    NIMBUS_NVRTC_CHECK(nvrtc().nvrtcGetPTXSize(guard.program, &size));
    image.resize(size);
    NIMBUS_NVRTC_CHECK(nvrtc().nvrtcGetPTX(guard.program, image.data()));
  }
  return image;
}

std::vector<std::string> nvrtc_architectures() {
  int count = 0;
  NIMBUS_NVRTC_CHECK(nvrtc().nvrtcGetNumSupportedArchs(&count));
  std::vector<int> archs(static_cast<size_t>(count));
  NIMBUS_NVRTC_CHECK(nvrtc().nvrtcGetSupportedArchs(archs.data()));
  std::sort(archs.begin(), archs.end());
  std::vector<std::string> names;
  names.reserve(archs.size());
  for (const int arch : archs) names.push_back(fmt::format("sm_{}", arch));
  return names;
}

KernelCache::KernelCache(std::filesystem::path directory) : directory_(std::move(directory)) {}

KernelCache& KernelCache::global() {
  static KernelCache* const cache = new KernelCache(default_directory());  // never destroyed: kernels outlive statics
  return *cache;
}

std::filesystem::path KernelCache::default_directory() {
  if (const char* dir = std::getenv("NIMBUS_KERNEL_CACHE"); dir != nullptr && *dir != '\0') return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::filesystem::path(xdg) / "nimbus" / "kernels";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::filesystem::path(home) / ".cache" / "nimbus" / "kernels";
  }
  return {};
}

std::string KernelCache::image(const FusedKernelSource& kernel, const std::string& arch) {
  const auto key = std::make_pair(kernel.hash, arch);
  {
    std::lock_guard lock(mutex_);
    if (const auto found = images_.find(key); found != images_.end()) {
      ++stats_.memory_hits;
      return found->second;
    }
  }
  const std::filesystem::path file =
      directory_.empty()
          ? std::filesystem::path()
          : directory_ / fmt::format("{}.{}.{}", kernel.name, arch, arch.starts_with("sm_") ? "cubin" : "ptx");
  std::string image = file.empty() ? std::string() : read_file(file);
  const bool from_disk = !image.empty();
  if (!from_disk) {
    image = nvrtc_compile(kernel.source, kernel.name, arch);
    if (!file.empty()) write_file_atomically(file, image);
  }
  std::lock_guard lock(mutex_);
  ++(from_disk ? stats_.disk_hits : stats_.compiles);
  return images_.emplace(key, std::move(image)).first->second;
}

cudaKernel_t KernelCache::load(const FusedKernelSource& kernel, int device) {
  const auto key = std::make_pair(kernel.hash, device);
  {
    std::lock_guard lock(mutex_);
    if (const auto found = loaded_.find(key); found != loaded_.end()) return found->second.second;
  }
  cudaDeviceProp prop{};
  NIMBUS_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  const std::string own = fmt::format("sm_{}{}", prop.major, prop.minor);
  const std::vector<std::string> known = nvrtc_architectures();
  // A device newer than this NVRTC runs the newest PTX it can make, which its driver compiles.
  const std::string arch =
      std::find(known.begin(), known.end(), own) != known.end() ? own : "compute_" + known.back().substr(3);
  const std::string code = image(kernel, arch);
  NIMBUS_CUDA_CHECK(cudaSetDevice(device));
  cudaLibrary_t library = nullptr;
  NIMBUS_CUDA_CHECK(cudaLibraryLoadData(&library, code.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  cudaKernel_t function = nullptr;
  NIMBUS_CUDA_CHECK(cudaLibraryGetKernel(&function, library, kernel.name.c_str()));
  std::lock_guard lock(mutex_);
  loaded_.emplace(key, std::make_pair(library, function));
  return function;
}

KernelCache::Stats KernelCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace nimbus::cuda
