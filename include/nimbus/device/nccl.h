// NCCL, the library GPU replicas all-reduce their gradients through (mirrored over
// local GPUs, multi_worker_mirrored on GPUs). The CUDA backend loads it at run time
// with dlopen, never links it, so a machine without NCCL runs everything else:
//
//   NcclStatus nccl = nccl_status();   // found once, on first call
//   nccl.loaded;        // libnccl.so.2 was loaded and answered ncclGetVersion (no GPU needed)
//   nccl.to_string();   // "nccl: 2.28.9 (/usr/local/cuda-13.0/lib/libnccl.so.2)" or "nccl: not available: ..."
//
// Where it looks, first hit wins: $NIMBUS_NCCL_LIBRARY (a path: it alone, and a refusal when
// it does not load), the CUDA toolkit's lib/, pip's nvidia/nccl/lib (the python3 that CMake
// found at configure time), then the loader's own search (LD_LIBRARY_PATH, the system).
// "The build has NCCL support" means the CUDA backend is built: NCCL is always loaded, never linked.
#pragma once

#include <string>

namespace nimbus {

struct NcclStatus {
  bool loaded = false;
  std::string path;  // the file loaded
  int version = 0;   // ncclGetVersion: 22809 is 2.28.9
  // Why it is not loaded: no CUDA backend in this build, or each place tried and what failed.
  std::string reason;
  std::string remedy;

  // "2.28.9"
  std::string version_string() const;
  // One line for `nimbus info`.
  std::string to_string() const;
};

NcclStatus nccl_status();

// The CUDA backend provides the status (src/device/cuda/nccl_library.cc); without one,
// nccl_status() says the build has no CUDA backend.
void set_nccl_status_provider(NcclStatus (*provider)());

}  // namespace nimbus
