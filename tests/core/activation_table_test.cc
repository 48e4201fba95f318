// The activation table: both vocabularies map to one Activation, the unknown
// names' errors list the known ones, and what epilogue fusion reads off an op
// node names an activation a fused op takes.
#include "nimbus/ops/activation_table.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nimbus/base/error.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/linalg.h"

namespace nimbus {
namespace {

TEST(ActivationTable, ReadsKerasNamesAndTheirAliases) {
  EXPECT_EQ(activation_from_keras_name(""), Activation::kLinear);
  EXPECT_EQ(activation_from_keras_name("linear"), Activation::kLinear);
  EXPECT_EQ(activation_from_keras_name("gelu"), Activation::kGeluErf);
  EXPECT_EQ(activation_from_keras_name("swish"), Activation::kSilu);
  EXPECT_EQ(activation_from_keras_name("silu"), Activation::kSilu);
}

TEST(ActivationTable, AnUnknownKerasNameListsTheKnownOnes) {
  try {
    (void)activation_from_keras_name("gelu_tanh");
    FAIL() << "gelu_tanh is no Keras name";
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.message(), "unknown activation 'gelu_tanh'");
    EXPECT_EQ(error.hint(), "use one of linear, relu, sigmoid, tanh, softmax, log_softmax, gelu, softplus, silu");
  }
}

TEST(ActivationTable, AnUnknownFusedActivationListsTheKnownOnes) {
  const std::vector<std::string_view> expected = {"none", "relu", "sigmoid", "tanh", "gelu_tanh", "gelu_erf"};
  EXPECT_EQ(fused_activation_names(), expected);
  try {
    (void)fused_matmul(ones({2, 3}), ones({3, 4}), ones({4}), "linear");
    FAIL() << "linear is no fused-op name";
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.message(),
              "fused_matmul: unknown activation \"linear\": none, relu, sigmoid, tanh, gelu_tanh or gelu_erf");
  }
}

TEST(ActivationTable, EachFusableOpGivesAnActivationAFusedOpTakes) {
  EXPECT_EQ(fusable_activation_computed_by("gelu", Attrs{{"approximate", std::string("tanh")}}), Activation::kGeluTanh);
  EXPECT_EQ(fusable_activation_computed_by("gelu", Attrs{{"approximate", std::string("none")}}), Activation::kGeluErf);
  EXPECT_EQ(fusable_activation_computed_by("relu", Attrs{}), Activation::kRelu);
  EXPECT_EQ(fusable_activation_computed_by("softmax", Attrs{}), std::nullopt);
  for (std::string_view name : fused_activation_names()) {
    const Attrs attrs{{"activation", std::string(name)}};
    EXPECT_EQ(fused_activation_name(fused_activation_of(attrs)), name);
  }
}

TEST(ActivationTable, SiluIsXTimesSigmoid) {
  const Tensor x = arange(-3, 3, 0.5);
  EXPECT_EQ(apply_activation(Activation::kSilu, x).to_vector<float>(), (x * sigmoid(x)).to_vector<float>());
}

}  // namespace
}  // namespace nimbus
