// runtime.precision and per-layer dtype_policy in configs, and what the memory
// accounting (the pre-run check's and the planner's) sees under each policy:
// the same f32 parameters and optimizer slots, and smaller activations.
#include <gtest/gtest.h>

#include <string>

#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/creation.h"
#include "nimbus/train/config.h"
#include "nimbus/train/memory_check.h"
#include "tests/support/policy_scope.h"

namespace nimbus {
namespace {

const char* kConfig = R"(model:
  input_shape: [4, 4, 1]
  layers:
    - Flatten: {}
    - Dense: {units: 8, activation: relu}
    - Dense: {units: 3, dtype_policy: float32}
data:
  train: {images: a.idx, labels: b.idx}
runtime:
  precision: mixed_bfloat16
)";

TEST(PrecisionConfig, RuntimePrecisionAndPerLayerPoliciesReachTheLayers) {
  const nlohmann::json config = train::parse_config(kConfig, "mixed.yaml");
  EXPECT_EQ(config["runtime"]["precision"], "mixed_bfloat16");
  const nn::Model model = train::model_from_train_config(config);
  std::vector<std::string> policies;
  for (const nn::Layer& layer : model.layers()) policies.push_back(layer->dtype_policy.name);
  EXPECT_EQ(policies.back(), "float32");
  EXPECT_EQ(policies[policies.size() - 2], "mixed_bfloat16");
  EXPECT_EQ(nn::global_policy().name, "float32") << "building a config's model leaves the global policy as it was";
  // The default is float32.
  const std::string plain = std::string(kConfig).substr(0, std::string(kConfig).find("runtime:"));
  EXPECT_EQ(train::parse_config(plain, "plain.yaml")["runtime"]["precision"], "float32");
}

TEST(PrecisionConfig, AnUnknownPolicyNamesTheKeyAndTheChoices) {
  const nlohmann::json config = train::parse_config(kConfig, "mixed.yaml", {"runtime.precision=mixed_float8"});
  try {
    (void)train::model_from_train_config(config);
    FAIL() << "no error";
  } catch (const InvalidArgument& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("runtime.precision"), std::string::npos) << message;
    EXPECT_NE(message.find("mixed_float8"), std::string::npos) << message;
    EXPECT_NE(error.hint().find("mixed_float16"), std::string::npos) << error.hint();
  }
}

graph::MemoryEstimate memory_under(const char* policy_name) {
  const testing::GlobalPolicyScope policy(policy_name);
  nn::Sequential model({nn::InputLayer({64}), nn::Dense(256, {.activation = "relu"}),
                        nn::Dense(256, {.activation = "relu"}), nn::Dense(10)});
  train::Trainer trainer = train::compile(
      model, {.optimizer = train::Adam(), .loss = train::SparseCategoricalCrossentropy({.from_logits = true})});
  const Tensor x = zeros({1, 64});
  const Tensor y = zeros({1}, DType::kI64);
  return train::analyze_train_step(trainer, x, y, 512).memory;
}

TEST(PrecisionMemory, MixedPoliciesKeepF32ParametersAndSlotsAndHalveActivations) {
  const graph::MemoryEstimate f32 = memory_under("float32");
  for (const char* policy : {"mixed_float16", "mixed_bfloat16"}) {
    SCOPED_TRACE(policy);
    const graph::MemoryEstimate mixed = memory_under(policy);
    EXPECT_EQ(mixed.parameter_bytes, f32.parameter_bytes);
    EXPECT_EQ(mixed.gradient_bytes, f32.gradient_bytes);  // gradients of f32 variables are f32
    // Adam's slots are the same; under mixed_float16 the loss scale adds one f32 scalar.
    EXPECT_LE(mixed.optimizer_state_bytes - f32.optimizer_state_bytes, 4u);
    EXPECT_LT(double(mixed.activation_bytes), 0.7 * double(f32.activation_bytes))
        << "f32 activations " << f32.activation_bytes << ", mixed " << mixed.activation_bytes;
    EXPECT_LT(mixed.total(), f32.total());
  }
}

}  // namespace
}  // namespace nimbus
