#include "nimbus/ops/precision.h"

#include <algorithm>

#include "nimbus/ops/elementwise.h"

namespace nimbus {

namespace {

struct OpRule {
  std::string_view op;
  PrecisionRule rule;
};

constexpr PrecisionRule kCompute = PrecisionRule::kComputeDType;
constexpr PrecisionRule kF32 = PrecisionRule::kFloat32;
constexpr PrecisionRule kFollow = PrecisionRule::kFollowInputs;
constexpr PrecisionRule kKeep = PrecisionRule::kKeepInputs;

// THE table: one rule for every op in the registry, sorted by name.
constexpr OpRule kRules[] = {
    {"abs", kFollow},
    {"adam_update", kKeep},  // writes into its weights and slots: casting them would write into copies
    {"add", kFollow},
    {"all_reduce", kKeep},        // sums the replicas' float32 gradients as they are
    {"all_reduce_start", kKeep},  // the same, in two halves (overlap)
    {"all_reduce_wait", kKeep},
    {"argmax", kFollow},
    {"assign", kKeep},  // writes into input 0: casting it would write into a copy
    {"avg_pool2d", kFollow},
    {"avg_pool2d_backward", kFollow},
    {"batch_norm_backward", kF32},  // normalization statistics
    {"batch_norm_inference", kF32},
    {"batch_norm_training", kF32},
    {"broadcast_to", kFollow},
    {"cast", kKeep},  // its dtype attribute is the point
    {"clip", kFollow},
    {"concat", kFollow},
    {"conv2d", kCompute},
    {"conv2d_backward_filter", kCompute},
    {"conv2d_backward_input", kCompute},
    {"cos", kFollow},
    {"div", kFollow},
    {"dropout_mask", kFollow},
    {"equal", kFollow},
    {"erf", kFollow},
    {"exp", kF32},
    {"fill", kFollow},
    {"fused_conv2d", kCompute},
    {"fused_elementwise", kKeep},  // built by fusion from ops whose casts are already in the graph
    {"fused_matmul", kCompute},
    {"gather", kFollow},
    {"gelu", kFollow},
    {"gelu_backward", kFollow},
    {"greater", kFollow},
    {"greater_equal", kFollow},
    {"identity", kFollow},
    {"isfinite", kFollow},
    {"layer_norm", kF32},  // normalization statistics
    {"layer_norm_backward", kF32},
    {"less", kFollow},
    {"less_equal", kFollow},
    {"log", kF32},
    {"log_softmax", kF32},
    {"logical_and", kFollow},
    {"logical_not", kFollow},
    {"logical_or", kFollow},
    {"matmul", kCompute},  // batched too: matmul takes leading batch axes
    {"max_pool2d", kFollow},
    {"max_pool2d_backward", kFollow},
    {"maximum", kFollow},
    {"mean", kF32},
    {"minimum", kFollow},
    {"mul", kFollow},
    {"neg", kFollow},
    {"not_equal", kFollow},
    {"one_hot", kFollow},
    {"pad", kFollow},
    {"pow", kF32},
    {"random_normal", kFollow},
    {"random_uniform", kFollow},
    {"range", kFollow},
    {"reduce_max", kFollow},  // picks an element: exact in any dtype
    {"reduce_min", kFollow},
    {"relu", kFollow},
    {"reshape", kFollow},
    {"rsqrt", kF32},
    {"scatter_add", kF32},  // accumulates (embedding gradients)
    {"sigmoid", kFollow},
    {"sign", kFollow},
    {"sin", kFollow},
    {"slice", kFollow},
    {"softmax", kF32},
    {"softmax_cross_entropy", kF32},
    {"softplus", kF32},  // exp and log inside
    {"sparse_softmax_cross_entropy", kF32},
    {"split", kFollow},
    {"sqrt", kFollow},
    {"square", kFollow},
    {"stop_gradient", kFollow},
    {"sub", kFollow},
    {"sum", kF32},
    {"tanh", kFollow},
    {"top_k", kFollow},
    {"transpose", kFollow},
    {"tril", kFollow},
    {"triu", kFollow},
    {"variance", kF32},
    {"where", kFollow},
};

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

std::optional<PrecisionRule> precision_rule(std::string_view op_name) {
  const auto* it = std::lower_bound(std::begin(kRules), std::end(kRules), op_name,
                                    [](const OpRule& rule, std::string_view name) { return rule.op < name; });
  if (it == std::end(kRules) || it->op != op_name) return std::nullopt;
  return it->rule;
}

AutocastScope::AutocastScope(DType compute_dtype) : previous_(thread_autocast_dtype()) {
  NIMBUS_ASSERT(castable(compute_dtype)) << "autocast to " << dtype_name(compute_dtype);
  thread_autocast_dtype() = compute_dtype;
}
AutocastScope::~AutocastScope() { thread_autocast_dtype() = previous_; }

DType autocast_dtype() { return thread_autocast_dtype(); }

std::vector<Tensor> autocast_inputs(const OpSchema& op, std::span<const Tensor> inputs, DType compute_dtype) {
  // An op missing from the table follows its inputs (OpPrecision.EveryOpHasARule keeps none missing).
  const PrecisionRule rule = precision_rule(op.name).value_or(PrecisionRule::kFollowInputs);
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
