// Dynamic loss scaling: the Keras algorithm (grow after growth_interval
// finite steps, halve and skip on inf/NaN), a skipped step that changes no
// weight, slot or step counter, the state through a checkpoint, and f16
// gradients that underflow to zero without scaling and come back with it.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>

#include "nimbus/monitor/run_monitor.h"
#include "nimbus/monitor/training_metrics.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/creation.h"
#include "nimbus/train/trainer.h"
#include "tests/support/policy_scope.h"
#include "tests/support/tensor_compare.h"

namespace nimbus {
namespace {

TEST(LossScale, GrowsAfterTheIntervalAndHalvesOnOverflow) {
  train::DynamicLossScale scale({.initial_scale = 1024, .growth_interval = 3});
  EXPECT_EQ(scale.scale(), 1024);
  scale.update(true);
  scale.update(true);
  EXPECT_EQ(scale.scale(), 1024);
  EXPECT_EQ(scale.good_steps(), 2);
  scale.update(true);
  EXPECT_EQ(scale.scale(), 2048);
  EXPECT_EQ(scale.good_steps(), 0);
  scale.update(true);
  scale.update(false);
  EXPECT_EQ(scale.scale(), 1024);
  EXPECT_EQ(scale.good_steps(), 0);
  EXPECT_EQ(scale.skipped_steps(), 1);
  // Never below 1.
  train::DynamicLossScale small({.initial_scale = 1});
  small.update(false);
  EXPECT_EQ(small.scale(), 1);
  EXPECT_THROW(train::DynamicLossScale({.initial_scale = 0}), InvalidArgument);
}

TEST(LossScale, KerasDefaults) {
  const train::DynamicLossScale scale;
  EXPECT_EQ(scale.scale(), 32768);
  EXPECT_EQ(scale.options().growth_interval, 2000);
  EXPECT_EQ(scale.options().factor, 2);
}

nn::Sequential small_model() {
  return nn::Sequential({nn::InputLayer({6}), nn::Dense(8, {.activation = "relu"}), nn::Dense(3)});
}

train::Trainer compile_adam(const nn::Model& model, std::optional<train::LossScaleOptions> loss_scale = std::nullopt) {
  return train::compile(model, {.optimizer = train::Adam({.learning_rate = 0.01}),
                                .loss = train::SparseCategoricalCrossentropy({.from_logits = true}),
                                .loss_scale = loss_scale});
}

std::vector<Tensor> snapshot(const std::vector<Variable>& variables) {
  std::vector<Tensor> values;
  for (const Variable& v : variables) values.push_back(v.value().clone());
  return values;
}

bool unchanged(const std::vector<Variable>& variables, const std::vector<Tensor>& before) {
  for (size_t i = 0; i < variables.size(); ++i) {
    if (!testing::bit_identical(variables[i].value(), before[i])) return false;
  }
  return true;
}

class SkippedStep : public ::testing::TestWithParam<bool> {};

// An inf in the batch makes the gradients inf/NaN: that step changes nothing but the scale.
TEST_P(SkippedStep, AnInfGradientSkipsExactlyThatUpdate) {
  const bool graph = GetParam();
  const testing::GlobalPolicyScope policy("mixed_float16");
  nn::Sequential model = small_model();
  train::Trainer trainer = compile_adam(model, train::LossScaleOptions{.initial_scale = 256, .growth_interval = 2});
  const Tensor x = random_uniform({4, 6}, -1, 1);
  const Tensor y = Tensor::from_vector<int64_t>({0, 1, 2, 0}, {4});
  std::vector<float> poisoned_values = x.to_vector<float>();
  poisoned_values[5] = std::numeric_limits<float>::infinity();
  const Tensor poisoned = Tensor::from_vector<float>(poisoned_values, {4, 6});
  const train::FitOptions options{.epochs = 1, .batch_size = 4, .shuffle = false, .verbose = 0, .graph = graph};

  trainer.fit(x, y, options);  // builds the optimizer's slots; one good step
  ASSERT_EQ(trainer.loss_scale()->good_steps(), 1);
  std::vector<Variable> state = model.weights();
  for (const Variable& v : trainer.optimizer().variables()) state.push_back(v);
  const std::vector<Tensor> before = snapshot(state);

  trainer.fit(poisoned, y, options);
  EXPECT_TRUE(unchanged(state, before)) << "the skipped step changed a weight, a slot or the step counter";
  EXPECT_EQ(trainer.loss_scale()->scale(), 128);
  EXPECT_EQ(trainer.loss_scale()->skipped_steps(), 1);
  EXPECT_EQ(trainer.loss_scale()->good_steps(), 0);

  trainer.fit(x, y, options);
  EXPECT_FALSE(unchanged(state, before)) << "the next finite step must update";
  trainer.fit(x, y, options);
  EXPECT_EQ(trainer.loss_scale()->scale(), 256) << "two finite steps in a row grow the scale again";
  EXPECT_EQ(trainer.loss_scale()->skipped_steps(), 1);
}

// The profiler's step records carry the scale (metrics.jsonl's step lines and /metrics read them).
TEST(LossScale, StepsRecordTheScaleForStepLinesAndMetrics) {
  const testing::GlobalPolicyScope policy("mixed_float16");
  nn::Sequential model = small_model();
  train::Trainer trainer = compile_adam(model, train::LossScaleOptions{.initial_scale = 512, .growth_interval = 2});
  std::vector<monitor::StepRecord> steps;
  trainer.profiler().add_observer([&](const monitor::StepRecord& step) { steps.push_back(step); });
  std::vector<float> values = random_uniform({4, 6}, -1, 1).to_vector<float>();
  values[0] = std::numeric_limits<float>::quiet_NaN();
  const Tensor nan_batch = Tensor::from_vector<float>(values, {4, 6});
  const Tensor y = Tensor::from_vector<int64_t>({0, 1, 2, 0}, {4});
  trainer.fit(nan_batch, y, {.epochs = 1, .batch_size = 4, .verbose = 0});
  ASSERT_EQ(steps.size(), 1u);
  ASSERT_TRUE(steps[0].loss_scale.has_value());
  EXPECT_EQ(*steps[0].loss_scale, 256);
  EXPECT_EQ(steps[0].skipped_steps, 1);
  const nlohmann::json line = monitor::step_line_fields(steps[0], Device::cpu());
  EXPECT_EQ(line.at("loss_scale"), 256);
  EXPECT_EQ(line.at("skipped_steps"), 1);
  monitor::MetricRegistry registry;
  monitor::TrainingMetrics metrics(registry, Device::cpu());
  EXPECT_EQ(registry.value("nimbus_loss_scale"), 0);
  metrics.on_step(steps[0]);
  EXPECT_EQ(registry.value("nimbus_loss_scale"), 256);
  EXPECT_EQ(registry.value("nimbus_skipped_steps_total"), 1);
}

INSTANTIATE_TEST_SUITE_P(GraphAndEager, SkippedStep, ::testing::Bool());

TEST(LossScale, ResumesFromACheckpointWithTheSameScale) {
  const testing::GlobalPolicyScope policy("mixed_float16");
  const Tensor x = random_uniform({8, 6}, -1, 1);
  const Tensor y = Tensor::from_vector<int64_t>({0, 1, 2, 0, 1, 2, 0, 1}, {8});
  const train::LossScaleOptions options{.initial_scale = 64, .growth_interval = 3};
  nn::Sequential model = small_model();
  train::Trainer trainer = compile_adam(model, options);
  trainer.fit(x, y, {.epochs = 5, .batch_size = 8, .verbose = 0});  // 5 steps: grows once, 2 good steps after
  ASSERT_EQ(trainer.loss_scale()->scale(), 128);
  ASSERT_EQ(trainer.loss_scale()->good_steps(), 2);
  const std::string path =
      (std::filesystem::temp_directory_path() / "nimbus_loss_scale_checkpoint.safetensors").string();
  trainer.save_checkpoint(path);

  nn::Sequential restored_model = small_model();
  (void)restored_model(x, false);
  train::Trainer restored = compile_adam(restored_model, options);
  ASSERT_EQ(restored.loss_scale()->scale(), 64);
  restored.restore_checkpoint(path);
  EXPECT_EQ(restored.loss_scale()->scale(), 128);
  EXPECT_EQ(restored.loss_scale()->good_steps(), 2);
  EXPECT_EQ(restored.loss_scale()->skipped_steps(), 0);
  // One more step reaches the interval in both.
  restored.train_on_batch(x, y);
  EXPECT_EQ(restored.loss_scale()->scale(), 256);
  std::filesystem::remove(path);
}

// A linear model with inputs of 1e-4, a zero kernel and targets of 1e-4: the loss's gradient at
// the output is -1e-4 per sample and the kernel's, -2e-8, is below half of f16's smallest
// subnormal (2^-25), so an f16 backward pass rounds it to zero. Scaled by 2^15 it is
// representable, and unscaled in f32 it matches the float32 policy's. SGD with rate 1 makes the
// kernel after one step minus its gradient.
double kernel_after_one_step(const char* policy_name, std::optional<train::LossScaleOptions> loss_scale) {
  const testing::GlobalPolicyScope policy(policy_name);
  nn::Layer dense = nn::Dense(1, {.use_bias = false});
  nn::Sequential model({nn::InputLayer({4}), dense});
  const Tensor x = full({2, 4}, 1e-4);
  (void)model(x, false);
  Variable kernel = dense.weights()[0];
  kernel.assign(zeros({4, 1}));
  const Tensor y = full({2, 1}, 1e-4);
  train::Trainer trainer = train::compile(
      model,
      {.optimizer = train::SGD({.learning_rate = 1.0}), .loss = train::MeanSquaredError(), .loss_scale = loss_scale});
  trainer.train_on_batch(x, y);
  return kernel.value().to_vector<double>()[0];
}

TEST(LossScale, RecoversF16GradientsThatUnderflowWithoutIt) {
  const double reference = kernel_after_one_step("float32", std::nullopt);
  ASSERT_NEAR(reference, 2e-8, 1e-10) << "the float32 step the test is built around";
  EXPECT_EQ(kernel_after_one_step("mixed_float16", train::LossScaleOptions{.initial_scale = 1}), 0.0)
      << "without scaling the f16 gradient underflows";
  const double scaled = kernel_after_one_step("mixed_float16", std::nullopt);  // the default: 2^15
  EXPECT_NEAR(scaled, reference, 0.02 * reference);
}

}  // namespace
}  // namespace nimbus
