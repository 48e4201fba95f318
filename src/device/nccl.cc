#include "nimbus/device/nccl.h"

#include <fmt/format.h>

namespace nimbus {
namespace {

NcclStatus (*g_nccl_status_provider)() = nullptr;

}  // namespace

std::string NcclStatus::version_string() const {
  // NCCL_VERSION(major, minor, patch) = major * 10000 + minor * 100 + patch since 2.9.
  return fmt::format("{}.{}.{}", version / 10000, version / 100 % 100, version % 100);
}

std::string NcclStatus::to_string() const {
  if (loaded) return fmt::format("nccl: {} ({})", version_string(), path);
  return remedy.empty() ? fmt::format("nccl: not available: {}", reason)
                        : fmt::format("nccl: not available: {} ({})", reason, remedy);
}

NcclStatus nccl_status() {
  if (g_nccl_status_provider == nullptr) {
    return {.reason = "this build has no CUDA backend", .remedy = "rebuild with -DNIMBUS_CUDA=ON"};
  }
  return g_nccl_status_provider();
}

void set_nccl_status_provider(NcclStatus (*provider)()) { g_nccl_status_provider = provider; }

}  // namespace nimbus
