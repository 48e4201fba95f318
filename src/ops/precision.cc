#include "nimbus/ops/precision.h"

#include <algorithm>

#include "nimbus/ops/elementwise.h"

namespace nimbus {

namespace {

bool castable(DType dtype) { return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16; }

DType& thread_autocast_dtype() {
  thread_local DType dtype = DType::kF32;
  return dtype;
}

}  // namespace

std::string_view precision_rule_name(PrecisionRule rule) {
  switch (rule) {
    case PrecisionRule::kComputeDType: return "compute dtype";
    case PrecisionRule::kFloat32: return "float32";
    case PrecisionRule::kFollowInputs: return "follows inputs";
    case PrecisionRule::kKeepInputs: return "keeps inputs";
  }
  return "?";
}

AutocastScope::AutocastScope(DType compute_dtype) : previous_(thread_autocast_dtype()) {
  NIMBUS_ASSERT(castable(compute_dtype)) << "autocast to " << dtype_name(compute_dtype);
  thread_autocast_dtype() = compute_dtype;
}
AutocastScope::~AutocastScope() { thread_autocast_dtype() = previous_; }

DType autocast_dtype() { return thread_autocast_dtype(); }

std::vector<Tensor> autocast_inputs(const OpSchema& op, std::span<const Tensor> inputs, DType compute_dtype) {
  // An op without a rule follows its inputs (the registry test keeps every op stating one).
  const PrecisionRule rule = op.precision.value_or(PrecisionRule::kFollowInputs);
  if (rule == PrecisionRule::kKeepInputs) return {};
  DType target = compute_dtype;
  if (rule == PrecisionRule::kFloat32) target = DType::kF32;
  if (rule == PrecisionRule::kFollowInputs) {
    // Only inputs of different floating dtypes need a cast.
    const auto first = std::find_if(inputs.begin(), inputs.end(), [](const Tensor& t) { return castable(t.dtype()); });
    if (first == inputs.end()) return {};
    const bool mixed = std::any_of(inputs.begin(), inputs.end(),
                                   [&](const Tensor& t) { return castable(t.dtype()) && t.dtype() != first->dtype(); });
    if (!mixed) return {};
  }
  const bool any = std::any_of(inputs.begin(), inputs.end(),
                               [&](const Tensor& t) { return castable(t.dtype()) && t.dtype() != target; });
  if (!any) return {};
  std::vector<Tensor> result(inputs.begin(), inputs.end());
  for (Tensor& input : result) {
    if (castable(input.dtype()) && input.dtype() != target) input = cast(input, target);
  }
  return result;
}

}  // namespace nimbus
