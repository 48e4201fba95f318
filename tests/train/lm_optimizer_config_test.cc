// What a language model's config asks of the optimizer: AdamW whose weight decay spares the
// variables named in exclude_from_weight_decay, a learning-rate schedule (cosine decay with warmup)
// given as a mapping, and clipnorm / global_clipnorm, all from compile.optimizer.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "nimbus/base/error.h"
#include "nimbus/train/config.h"
#include "nimbus/train/from_config.h"
#include "nimbus/train/optimizers.h"
#include "train_test_util.h"

namespace nimbus::testing {
namespace {

const char* kLmOptimizerYaml = R"(model:
  input_shape: [4]
  layers:
    - Dense: {units: 3}
data:
  train: {images: a.idx, labels: b.idx}
compile:
  optimizer:
    name: adamw
    weight_decay: 0.1
    exclude_from_weight_decay: [bias, gamma, beta, embeddings]
    global_clipnorm: 1.0
    learning_rate: {name: cosine_decay, initial_learning_rate: 0.0, decay_steps: 100, alpha: 0.1,
                    warmup_target: 0.001, warmup_steps: 10}
)";

// Keras's CosineDecay with warmup written out: linear from 0 to the target over the warmup, then
// target * ((1 - alpha) * (1 + cos(pi * min(s, decay_steps) / decay_steps)) / 2 + alpha).
double cosine_with_warmup(int64_t step) {
  const double target = 0.001, alpha = 0.1;
  if (step < 10) return target * static_cast<double>(step) / 10;
  const double progress = std::min<double>(static_cast<double>(step - 10), 100) / 100;
  return target * ((1 - alpha) * 0.5 * (1 + std::cos(std::numbers::pi * progress)) + alpha);
}

std::string error_text(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return error.message() + " | " + error.hint();
  }
  return "(no error)";
}

TEST(LmOptimizerConfig, CosineScheduleWithWarmupFromTheConfigFollowsTheFormula) {
  const nlohmann::json config = train::parse_config(kLmOptimizerYaml, "lm.yaml");
  auto optimizer = train::optimizer_from_config(config["compile"]["optimizer"]);
  EXPECT_EQ(optimizer->name(), "AdamW");
  Variable w(Tensor::from_vector<double>({1.0}, {1}), "dense/kernel");
  int64_t step = 0;
  for (const int64_t checked : {0, 3, 10, 35, 60, 110, 130}) {
    for (; step < checked; ++step) optimizer->apply_gradients({Tensor::from_vector<double>({0.0}, {1})}, {w});
    EXPECT_NEAR(optimizer->current_learning_rate(), cosine_with_warmup(checked), 1e-15) << checked;
  }
  EXPECT_NEAR(cosine_with_warmup(10), 0.001, 1e-18);    // the peak after warmup
  EXPECT_NEAR(cosine_with_warmup(130), 0.0001, 1e-18);  // alpha's floor after decay_steps

  // Exponential and piecewise schedules by Keras class name too.
  auto exponential = train::optimizer_from_config(
      {{"name", "sgd"},
       {"learning_rate",
        {{"name", "ExponentialDecay"}, {"initial_learning_rate", 0.1}, {"decay_steps", 10}, {"decay_rate", 0.5}}}});
  EXPECT_NEAR(exponential->current_learning_rate(), 0.1, 1e-15);
  auto piecewise = train::optimizer_from_config(
      {{"name", "rmsprop"},
       {"learning_rate", {{"name", "piecewise_constant_decay"}, {"boundaries", {5}}, {"values", {0.1, 0.01}}}}});
  EXPECT_NEAR(piecewise->current_learning_rate(), 0.1, 1e-15);
}

TEST(LmOptimizerConfig, ExcludedVariablesAreUntouchedByDecayAndTheRestFollowAdamW) {
  const nlohmann::json config = train::parse_config(kLmOptimizerYaml, "lm.yaml");
  for (const bool fused : {false, true}) {
    nlohmann::json spec = config["compile"]["optimizer"];
    spec["learning_rate"] = 0.01;
    spec["fused"] = fused;
    spec.erase("global_clipnorm");
    auto optimizer = train::optimizer_from_config(spec);
    std::vector<Variable> variables = {Variable(Tensor::from_vector<double>({0.5, -2.0}, {2}), "dense/kernel"),
                                       Variable(Tensor::from_vector<double>({0.5, -2.0}, {2}), "dense/bias"),
                                       Variable(Tensor::from_vector<double>({0.5, -2.0}, {2}), "norm/gamma"),
                                       Variable(Tensor::from_vector<double>({0.5, -2.0}, {2}), "token/embeddings")};
    // Zero gradients: Adam's own step is 0, so only the decay moves a variable: w (1 - lr wd)^steps.
    const Tensor zero = Tensor::from_vector<double>({0.0, 0.0}, {2});
    for (int i = 0; i < 3; ++i) optimizer->apply_gradients({zero, zero, zero, zero}, variables);
    const double factor = std::pow(1 - 0.01 * 0.1, 3);
    EXPECT_LT(relative_error(values_of(variables[0].value()), {0.5 * factor, -2.0 * factor}), 1e-15) << fused;
    for (size_t i = 1; i < variables.size(); ++i) {
      EXPECT_EQ(values_of(variables[i].value()), (std::vector<double>{0.5, -2.0})) << variables[i].name() << fused;
    }
  }
  // With gradients: an excluded variable moves as under Adam, the rest as under AdamW.
  const Tensor g = Tensor::from_vector<double>({0.3, -0.1}, {2});
  auto step_of = [&](const std::shared_ptr<train::Optimizer>& optimizer, const std::string& name) {
    Variable w(Tensor::from_vector<double>({0.5, -2.0}, {2}), name);
    for (int i = 0; i < 3; ++i) optimizer->apply_gradients({g}, {w});
    return values_of(w.value());
  };
  auto excluding = [] {
    return train::AdamW({.learning_rate = 0.01, .weight_decay = 0.1, .exclude_from_weight_decay = {"bias$"}});
  };
  EXPECT_EQ(step_of(excluding(), "dense/bias"), step_of(train::Adam({.learning_rate = 0.01}), "dense/bias"));
  EXPECT_EQ(step_of(excluding(), "dense/kernel"),
            step_of(train::AdamW({.learning_rate = 0.01, .weight_decay = 0.1}), "dense/kernel"));
  EXPECT_NE(step_of(excluding(), "dense/kernel"), step_of(train::Adam({.learning_rate = 0.01}), "dense/kernel"));
}

TEST(LmOptimizerConfig, ClipnormReachableAndBadSettingsNamed) {
  const nlohmann::json config = train::parse_config(kLmOptimizerYaml, "lm.yaml");
  auto optimizer = train::optimizer_from_config(config["compile"]["optimizer"]);
  const auto clipped = optimizer->clip_gradients({Tensor::from_vector<double>({3, 4}, {2})});  // norm 5 -> 1
  EXPECT_LT(relative_error(values_of(clipped[0]), {0.6, 0.8}), 1e-15);

  const std::string regex = error_text([] {
    train::optimizer_from_config({{"name", "adamw"}, {"exclude_from_weight_decay", {"bias("}}});
  });
  EXPECT_NE(regex.find("exclude_from_weight_decay: 'bias(' is not a regular expression"), std::string::npos) << regex;
  const std::string adam = error_text([] {
    train::optimizer_from_config({{"name", "adam"}, {"exclude_from_weight_decay", {"bias"}}});
  });
  EXPECT_NE(adam.find("Adam takes no argument 'exclude_from_weight_decay'"), std::string::npos) << adam;
  const std::string schedule = error_text([] {
    train::optimizer_from_config({{"name", "adam"}, {"learning_rate", {{"name", "cosine"}, {"decay_steps", 5}}}});
  });
  EXPECT_NE(schedule.find("unknown learning-rate schedule 'cosine'"), std::string::npos) << schedule;
  EXPECT_NE(schedule.find("cosine_decay (CosineDecay)"), std::string::npos) << schedule;
  const std::string typo = error_text([] {
    std::string text = kLmOptimizerYaml;
    text.replace(text.find("warmup_steps"), 12, "warmup_step");
    train::parse_config(text, "lm.yaml");
  });
  EXPECT_NE(typo.find("unknown key 'compile.optimizer.learning_rate.warmup_step'"), std::string::npos) << typo;
  EXPECT_NE(typo.find("did you mean 'compile.optimizer.learning_rate.warmup_steps'"), std::string::npos) << typo;
}

}  // namespace
}  // namespace nimbus::testing
