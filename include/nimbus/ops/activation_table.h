// Every activation Nimbus knows by name, in one table: the Keras name a layer
// takes, the name fused_matmul's and fused_conv2d's "activation" attribute
// gives (for those a contraction kernel can end with), and the ops that
// compute it. Layers, the fused ops, epilogue fusion and the backends'
// epilogues (oneDNN post-ops, cuBLASLt, cuDNN) all read it.
//
//   activation_from_keras_name("gelu");             // Activation::kGeluErf (a layer's "gelu")
//   fused_activation_of(node.attrs);                // a fused op's attribute: "gelu_erf" -> kGeluErf
//   apply_activation(Activation::kSilu, x);         // x * sigmoid(x)
//
// The two vocabularies differ in three rows: Keras's "linear" is the
// attribute's "none", Keras's (exact) "gelu" is "gelu_erf", and the
// tanh-approximated GELU has an attribute name only.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nimbus/ops/attrs.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus {

struct InferContext;

enum class Activation { kLinear, kRelu, kSigmoid, kTanh, kGeluTanh, kSoftmax, kLogSoftmax, kGeluErf, kSoftplus, kSilu };

struct ActivationNames {
  Activation activation;
  std::string_view keras;        // what layers take; "" when they do not
  std::string_view keras_alias;  // a second Keras name, or ""
  std::string_view fused;        // the fused ops' attribute; "" when no contraction kernel ends with it
};

// In the order the error messages list the names.
inline constexpr std::array<ActivationNames, 10> kActivations = {{
    {Activation::kLinear, "linear", "", "none"},
    {Activation::kRelu, "relu", "", "relu"},
    {Activation::kSigmoid, "sigmoid", "", "sigmoid"},
    {Activation::kTanh, "tanh", "", "tanh"},
    {Activation::kGeluTanh, "", "", "gelu_tanh"},
    {Activation::kSoftmax, "softmax", "", ""},
    {Activation::kLogSoftmax, "log_softmax", "", ""},
    {Activation::kGeluErf, "gelu", "", "gelu_erf"},
    {Activation::kSoftplus, "softplus", "", ""},
    {Activation::kSilu, "silu", "swish", ""},
}};

// A layer's activation by Keras's name; "" (Keras's None) is linear. Throws
// InvalidArgument naming the known ones.
Activation activation_from_keras_name(std::string_view name);

// The fused ops' attribute names in table order ("none", "relu", ...).
std::vector<std::string_view> fused_activation_names();
std::string_view fused_activation_name(Activation activation);
// The activation a fused op's "activation" attribute names. Throws
// InvalidArgument naming the known ones.
Activation fused_activation_of(const Attrs& attrs);
// Fails a fused op's inference when its "activation" attribute is none of them.
void check_fused_activation(const InferContext& ctx);
// The activation an op computes, when a fused op can end with it: relu,
// sigmoid, tanh, and gelu by its "approximate" attribute. What epilogue
// fusion folds into the contraction before it.
std::optional<Activation> fusable_activation_computed_by(std::string_view op, const Attrs& attrs);

// activation(x) as ops: softmax and log_softmax over the last axis, silu as x * sigmoid(x).
Tensor apply_activation(Activation activation, const Tensor& x);

}  // namespace nimbus
