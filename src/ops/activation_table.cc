#include "nimbus/ops/activation_table.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nimbus/base/error.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/op_schema.h"
#include "nimbus/ops/reduction.h"

namespace nimbus {
namespace {

std::optional<Activation> fused_activation_named(std::string_view name) {
  for (const ActivationNames& row : kActivations) {
    if (!row.fused.empty() && row.fused == name) return row.activation;
  }
  return std::nullopt;
}

std::string unknown_fused_activation(std::string_view name) {
  const std::vector<std::string_view> names = fused_activation_names();
  return fmt::format("unknown activation \"{}\": {} or {}", name, fmt::join(names.begin(), names.end() - 1, ", "),
                     names.back());
}

}  // namespace

Activation activation_from_keras_name(std::string_view name) {
  if (name.empty()) return Activation::kLinear;
  std::vector<std::string_view> known;
  for (const ActivationNames& row : kActivations) {
    if (row.keras.empty()) continue;
    if (row.keras == name || row.keras_alias == name) return row.activation;
    known.push_back(row.keras);
  }
  throw InvalidArgument(fmt::format("unknown activation '{}'", name),
                        fmt::format("use one of {}", fmt::join(known, ", ")));
}

std::vector<std::string_view> fused_activation_names() {
  std::vector<std::string_view> names;
  for (const ActivationNames& row : kActivations) {
    if (!row.fused.empty()) names.push_back(row.fused);
  }
  return names;
}

std::string_view fused_activation_name(Activation activation) {
  for (const ActivationNames& row : kActivations) {
    if (row.activation == activation && !row.fused.empty()) return row.fused;
  }
  throw InternalError(fmt::format("no fused op ends with activation {}", static_cast<int>(activation)));
}

Activation fused_activation_of(const Attrs& attrs) {
  const std::string& name = attrs.get_string("activation");
  const std::optional<Activation> activation = fused_activation_named(name);
  if (!activation) throw InvalidArgument(unknown_fused_activation(name));
  return *activation;
}

void check_fused_activation(const InferContext& ctx) {
  const std::string& name = ctx.attrs.get_string("activation");
  if (!fused_activation_named(name)) ctx.fail(unknown_fused_activation(name));
}

std::optional<Activation> fusable_activation_computed_by(std::string_view op, const Attrs& attrs) {
  if (op == "relu") return Activation::kRelu;
  if (op == "sigmoid") return Activation::kSigmoid;
  if (op == "tanh") return Activation::kTanh;
  if (op == "gelu") return attrs.get_string("approximate") == "tanh" ? Activation::kGeluTanh : Activation::kGeluErf;
  return std::nullopt;
}

Tensor apply_activation(Activation activation, const Tensor& x) {
  switch (activation) {
    case Activation::kLinear: return x;
    case Activation::kRelu: return relu(x);
    case Activation::kSigmoid: return sigmoid(x);
    case Activation::kTanh: return tanh(x);
    case Activation::kGeluTanh: return gelu(x, "tanh");
    case Activation::kSoftmax: return softmax(x, -1);
    case Activation::kLogSoftmax: return log_softmax(x, -1);
    case Activation::kGeluErf: return gelu(x, "none");
    case Activation::kSoftplus: return softplus(x);
    case Activation::kSilu: return x * sigmoid(x);
  }
  throw InternalError(fmt::format("no activation {}", static_cast<int>(activation)));
}

}  // namespace nimbus
