#include "src/device/cuda/nccl_library.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>

#include <cstdlib>
#include <vector>

#include "nimbus/base/error.h"

namespace nimbus::cuda {
namespace {

constexpr const char* kSoname = "libnccl.so.2";
constexpr const char* kInstallRemedy =
    "install NCCL 2 (pip: nvidia-nccl-cu13; Debian: NVIDIA's libnccl2), or set NIMBUS_NCCL_LIBRARY to a libnccl.so.2";

// The file the loader actually opened (a soname resolves through LD_LIBRARY_PATH and the cache).
std::string loaded_path(void* library, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(library, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr && *map->l_name) {
    return map->l_name;
  }
  return fallback;
}

// Binds every function; false (with the missing name in `missing`) when the library lacks one.
bool bind_all(void* library, NcclApi& api, std::string& missing) {
  bool complete = true;
  auto bind = [&](auto& slot, const char* name) {
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(library, name));
    if (slot == nullptr && complete) {
      missing = name;
      complete = false;
    }
  };
#define NIMBUS_NCCL_BIND(result, name, parameters) bind(api.name, #name);
  NIMBUS_NCCL_FUNCTIONS(NIMBUS_NCCL_BIND)
#undef NIMBUS_NCCL_BIND
  return complete;
}

// Loads `file` (a path, or the soname for the loader's search) into `api`; the status says what happened.
NcclStatus try_load(const std::string& file, NcclApi& api) {
  void* library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return {.path = file, .reason = dlerror()};
  NcclStatus status{.path = loaded_path(library, file)};
  std::string missing;
  if (!bind_all(library, api, missing)) {
    status.reason = fmt::format("{} has no {}: it is not NCCL 2.12 or newer", status.path, missing);
    return status;
  }
  if (const NcclResult result = api.ncclGetVersion(&status.version); result != kNcclSuccess) {
    status.reason = fmt::format("{}: ncclGetVersion failed ({})", status.path, api.ncclGetErrorString(result));
    return status;
  }
  status.loaded = true;
  return status;
}

// pip's nvidia/nccl/lib of the python3 CMake found (empty when it had none).
#ifndef NIMBUS_NCCL_PIP_DIR
#define NIMBUS_NCCL_PIP_DIR ""
#endif

// This process's NCCL, searched for once.
struct LoadedNccl {
  NcclApi api;
  NcclStatus status;
};

const LoadedNccl& loaded_nccl() {
  static const LoadedNccl loaded = [] {
    LoadedNccl result;
    result.status = find_nccl(std::getenv("NIMBUS_NCCL_LIBRARY"), &result.api);
    return result;
  }();
  return loaded;
}

NcclStatus loaded_nccl_status() { return loaded_nccl().status; }

const bool kNcclStatusProvided = (set_nccl_status_provider(loaded_nccl_status), true);

}  // namespace

NcclStatus find_nccl(const char* override_path, NcclApi* api) {
  NcclApi scratch;
  NcclApi& target = api != nullptr ? *api : scratch;
  if (override_path != nullptr && *override_path != '\0') {
    NcclStatus status = try_load(override_path, target);
    if (!status.loaded) {
      status.reason = fmt::format("NIMBUS_NCCL_LIBRARY={} does not load: {}", override_path, status.reason);
      status.remedy =
          "point NIMBUS_NCCL_LIBRARY at a libnccl.so.2, or unset it to search the toolkit, pip and the system";
    }
    return status;
  }
  std::vector<std::string> candidates = {fmt::format("{}/{}", NIMBUS_CUDA_LIBRARY_DIR, kSoname)};
  if (*NIMBUS_NCCL_PIP_DIR != '\0') candidates.push_back(fmt::format("{}/{}", NIMBUS_NCCL_PIP_DIR, kSoname));
  candidates.emplace_back(kSoname);  // LD_LIBRARY_PATH, the loader's cache, the system's folders
  std::string tried;
  for (const std::string& candidate : candidates) {
    NcclStatus status = try_load(candidate, target);
    if (status.loaded) return status;
    tried += fmt::format("{}{}", tried.empty() ? "" : "; ", status.reason);
  }
  return {.reason = fmt::format("no {} found ({})", kSoname, tried), .remedy = kInstallRemedy};
}

const NcclApi& nccl() {
  const LoadedNccl& loaded = loaded_nccl();
  if (!loaded.status.loaded) {
    throw Unavailable(fmt::format("cannot use NCCL: {}", loaded.status.reason), loaded.status.remedy);
  }
  return loaded.api;
}

void throw_nccl_error(NcclResult status, const char* call, NcclComm comm) {
  const NcclApi& api = nccl();
  const char* last = api.ncclGetLastError(comm);
  throw Unavailable(fmt::format("NCCL: {} failed: {}{}{}", call, api.ncclGetErrorString(status),
                                last != nullptr && *last ? ": " : "", last != nullptr ? last : ""),
                    "set NCCL_DEBUG=WARN for NCCL's own account of it");
}

}  // namespace nimbus::cuda
