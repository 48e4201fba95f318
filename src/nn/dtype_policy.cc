#include "nimbus/nn/dtype_policy.h"

#include <fmt/format.h>

#include <mutex>

#include "nimbus/base/error.h"

namespace nimbus::nn {

namespace {
std::mutex policy_mutex;
DTypePolicy& global_policy_storage() {
  static DTypePolicy policy;
  return policy;
}
}  // namespace

DTypePolicy DTypePolicy::named(std::string_view name) {
  if (name == "float32") return {.name = "float32", .compute_dtype = DType::kF32};
  if (name == "mixed_float16") return {.name = "mixed_float16", .compute_dtype = DType::kF16};
  if (name == "mixed_bfloat16") return {.name = "mixed_bfloat16", .compute_dtype = DType::kBF16};
  throw InvalidArgument(fmt::format("unknown dtype policy '{}'", name), "use float32, mixed_float16 or mixed_bfloat16");
}

DTypePolicy global_policy() {
  std::lock_guard lock(policy_mutex);
  return global_policy_storage();
}

void set_global_policy(const DTypePolicy& policy) {
  std::lock_guard lock(policy_mutex);
  global_policy_storage() = policy;
}

void set_global_policy(std::string_view name) { set_global_policy(DTypePolicy::named(name)); }

}  // namespace nimbus::nn
