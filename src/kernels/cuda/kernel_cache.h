// Run-time compiled kernels: NVRTC turns generated CUDA C (fused_codegen.h)
// into machine code for one architecture, cached in memory by the source's
// hash and on disk (~/.cache/nimbus/kernels, or $NIMBUS_KERNEL_CACHE), so a
// second run compiles nothing. Images load through the runtime's library API
// (cudaLibraryLoadData), never the driver library.
//
//   KernelCache& cache = KernelCache::global();
//   std::string cubin = cache.image(kernel, "sm_90");       // compile or cache hit
//   cudaKernel_t fn = cache.load(kernel, /*device=*/0);     // needs a GPU
//   cache.stats().compiles;
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "src/kernels/cuda/fused_codegen.h"

namespace nimbus::cuda {

// Compiles `source` with NVRTC for `arch`: "sm_NN" gives a cubin, "compute_NN"
// PTX. A compile error throws InternalError with NVRTC's log and the source.
std::string nvrtc_compile(const std::string& source, const std::string& name, const std::string& arch);

// The architectures this NVRTC can compile for ("sm_75", ..., highest last).
std::vector<std::string> nvrtc_architectures();

class KernelCache {
 public:
  struct Stats {
    uint64_t compiles = 0;
    uint64_t memory_hits = 0;
    uint64_t disk_hits = 0;
  };

  // Caches on disk under `directory` (empty: in memory only).
  explicit KernelCache(std::filesystem::path directory);
  // The process's cache, in default_directory().
  static KernelCache& global();
  // $NIMBUS_KERNEL_CACHE, else $XDG_CACHE_HOME/nimbus/kernels, else ~/.cache/nimbus/kernels.
  static std::filesystem::path default_directory();

  // The compiled image of `kernel` for `arch`, from memory, disk or NVRTC.
  std::string image(const FusedKernelSource& kernel, const std::string& arch);
  // The kernel loaded on `device`, compiled for its architecture (PTX of the newest
  // architecture NVRTC knows when it does not know the device's).
  cudaKernel_t load(const FusedKernelSource& kernel, int device);
  Stats stats() const;

 private:
  std::filesystem::path directory_;
  mutable std::mutex mutex_;
  std::map<std::pair<uint64_t, std::string>, std::string> images_;
  std::map<std::pair<uint64_t, int>, std::pair<cudaLibrary_t, cudaKernel_t>> loaded_;
  Stats stats_;
};

}  // namespace nimbus::cuda
