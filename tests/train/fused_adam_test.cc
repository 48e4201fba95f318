// Fused Adam and AdamW (AdamOptions::fused: one adam_update op per dtype and
// device) against the unfused ops, on the CPU: several steps over parameters
// of several shapes, eager and traced, with and without clipping and a
// schedule; an update skipped under loss scaling; checkpoints.
//
// The fused kernels compute the unfused ops' operations in their order, each
// rounded to f32 (no FMA contraction: the reference kernel's file is compiled
// with -ffp-contract=off, the .cu file uses round-to-nearest intrinsics), so the results are equal bit for bit; the
// tests check bit equality, which implies the 1e-6 relative bound.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>

#include "nimbus/autodiff/variable.h"
#include "nimbus/graph/function.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/train/loss_scale.h"
#include "nimbus/train/optimizers.h"
#include "nimbus/train/trainer.h"
#include "tests/support/policy_scope.h"
#include "tiny_run.h"
#include "train_test_util.h"

namespace nimbus::testing {
namespace {

// Same dtype, shape and bytes (tests/support/tensor_compare.h has this too, but its relative_error
// collides with train_test_util.h's).
bool bit_identical(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// {150, 257} takes the CPU kernel past one thread's share (kMemoryBoundGrain): the split of all the weights'
// elements then falls inside it, and the second thread's range runs on into the next weight.
const std::vector<Shape> kShapes = {{7, 5}, {5}, {3, 4, 2}, {1}, {150, 257}, {64, 33}};
constexpr int kSteps = 5;

std::vector<Variable> make_variables(DType dtype = DType::kF32) {
  std::vector<Variable> variables;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    variables.emplace_back(random_input(kShapes[i], dtype, 100 + i), fmt::format("w{}", i));
  }
  return variables;
}

// The gradients of step `step`: fresh normal values, some large enough for clipping to act.
std::vector<Tensor> gradients_at(int step) {
  std::vector<Tensor> gradients;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    gradients.push_back(random_input(kShapes[i], DType::kF32, 1000 * (step + 1) + i) * 3.0);
  }
  return gradients;
}

struct Setting {
  const char* name;
  bool adamw;
  bool clip;
  bool schedule;
};

std::shared_ptr<train::Optimizer> make_optimizer(const Setting& s, bool fused) {
  const train::LearningRate rate =
      s.schedule ? train::LearningRate(train::CosineDecay({.initial_learning_rate = 0.05, .decay_steps = 4}))
                 : train::LearningRate(0.01);
  std::optional<double> clip;
  if (s.clip) clip = 2.0;
  if (s.adamw) {
    return train::AdamW({.learning_rate = rate, .weight_decay = 0.1, .global_clipnorm = clip, .fused = fused});
  }
  return train::Adam({.learning_rate = rate, .clipnorm = clip, .fused = fused});
}

// One optimizer update of `variables` from the gradients it is called with, eager or traced (with fusion).
Function update_step(const std::shared_ptr<train::Optimizer>& optimizer, std::vector<Variable>& variables, bool traced,
                     bool skip_non_finite = false) {
  return function(
      [optimizer, &variables, skip_non_finite](const std::vector<Tensor>& gradients) {
        // What the trainer's loss scaling opens around the update.
        std::optional<ConditionalUpdateScope> skip;
        if (skip_non_finite) skip.emplace(train::all_finite(gradients));
        optimizer->apply_gradients(gradients, variables);
        return std::vector<Tensor>{};
      },
      {.name = "adam_step", .graph = traced, .jit = traced});
}

// Weights, then the optimizer's variables (step counter, rate, slots), after kSteps steps.
std::vector<Tensor> train_variables(const Setting& s, bool fused, bool traced) {
  std::vector<Variable> variables = make_variables();
  std::shared_ptr<train::Optimizer> optimizer = make_optimizer(s, fused);
  optimizer->build(variables);
  const Function step = update_step(optimizer, variables, traced);
  for (int k = 0; k < kSteps; ++k) step(gradients_at(k));
  std::vector<Tensor> state;
  for (const Variable& v : variables) state.push_back(v.value());
  for (const Variable& v : optimizer->variables()) state.push_back(v.value());
  return state;
}

const Setting kSettings[] = {{"adam", false, false, false},
                             {"adamw", true, false, false},
                             {"adam_clipnorm_schedule", false, true, true},
                             {"adamw_global_clipnorm", true, true, false}};

TEST(FusedAdam, EqualsTheUnfusedOpsBitForBitEagerAndTraced) {
  for (const Setting& s : kSettings) {
    const std::vector<Tensor> unfused = train_variables(s, false, false);
    for (const bool traced : {false, true}) {
      SCOPED_TRACE(std::string(s.name) + (traced ? " traced" : " eager"));
      const std::vector<Tensor> fused = train_variables(s, true, traced);
      ASSERT_EQ(fused.size(), unfused.size());
      for (size_t i = 0; i < fused.size(); ++i) {
        EXPECT_TRUE(bit_identical(fused[i], unfused[i]))
            << "variable " << i << ": relative error " << relative_error(fused[i], unfused[i]);
      }
      // Trained: the weights moved from their start.
      EXPECT_FALSE(bit_identical(fused[0], random_input(kShapes[0], DType::kF32, 100)));
    }
  }
}

// The traced step holds one adam_update for the five variables and no per-variable update chains.
TEST(FusedAdam, TheTracedStepHasOneUpdateNodeForAllVariables) {
  std::vector<Variable> variables = make_variables();
  std::shared_ptr<train::Optimizer> optimizer = train::AdamW({.fused = true});
  optimizer->build(variables);
  const Function step = update_step(optimizer, variables, true);
  const graph::Graph& g = step.traced_for(gradients_at(0)).optimized;
  int updates = 0, assigns = 0;
  for (const graph::Node& node : g.nodes()) {
    if (node.removed || node.kind != graph::NodeKind::kOp) continue;
    updates += node.op->name == "adam_update";
    assigns += node.op->name == "assign" || node.has_side_effects();
  }
  EXPECT_EQ(updates, 1) << g.to_text();
  // adam_update itself and the step counter's increment.
  EXPECT_EQ(assigns, 2) << g.to_text();
}

// Left unset, fused means "where adam_update has a kernel faster than its reference loop": not on the CPU.
// Counts the adam_update calls on its thread while alive.
class AdamUpdateCounter : public OpObserver {
 public:
  AdamUpdateCounter() { add_op_observer(this); }
  ~AdamUpdateCounter() override { remove_op_observer(this); }
  void on_op(const OpSchema& op, const Attrs&, std::span<const Tensor>, std::span<const Tensor>) override {
    calls += op.name == "adam_update" ? 1 : 0;
  }
  int calls = 0;
};

// Unset, the update is fused where adam_update has a kernel above its reference loop: f32 on the
// CPU (src/kernels/cpu/adam_update_kernel.cc), eager and traced; false keeps the unfused ops.
TEST(FusedAdam, UnsetFusesWhereAFastKernelExistsAndFalseNever) {
  for (const std::optional<bool> fused : {std::optional<bool>{}, std::optional<bool>{false}}) {
    SCOPED_TRACE(fused.has_value() ? "fused: false" : "fused unset");
    const int expected = fused.has_value() ? 0 : 1;
    std::vector<Variable> variables = make_variables();
    std::shared_ptr<train::Optimizer> optimizer = train::Adam({.fused = fused});
    optimizer->build(variables);
    {
      AdamUpdateCounter counter;
      update_step(optimizer, variables, false)(gradients_at(0));
      EXPECT_EQ(counter.calls, expected);
    }
    const Function step = update_step(optimizer, variables, true);
    const graph::Graph& g = step.traced_for(gradients_at(1)).optimized;
    int adam_updates = 0;
    for (const graph::Node& node : g.nodes()) {
      adam_updates += node.kind == graph::NodeKind::kOp && node.op->name == "adam_update" ? 1 : 0;
    }
    EXPECT_EQ(adam_updates, expected) << g.to_text();
  }
}

TEST(FusedAdam, FusedOnHalfVariablesIsRefusedWithTheVariableNamed) {
  std::vector<Variable> variables = {Variable(random_input({3}, DType::kF16), "half_kernel")};
  std::shared_ptr<train::Optimizer> optimizer = train::Adam({.fused = true});
  const std::string message =
      error_message([&] { optimizer->apply_gradients({random_input({3}, DType::kF16)}, variables); });
  EXPECT_NE(message.find("half_kernel"), std::string::npos) << message;
  EXPECT_NE(message.find("f16"), std::string::npos) << message;
}

// An inf gradient under a ConditionalUpdateScope (what the trainer's loss scaling opens) changes no
// weight, slot or step counter, eagerly and traced.
TEST(FusedAdam, AnUpdateSkippedForAnInfGradientChangesNothing) {
  for (const bool traced : {false, true}) {
    SCOPED_TRACE(traced ? "traced" : "eager");
    std::vector<Variable> variables = make_variables();
    std::shared_ptr<train::Optimizer> optimizer = train::AdamW({.learning_rate = 0.01, .fused = true});
    optimizer->build(variables);
    const Function step = update_step(optimizer, variables, traced, true);
    step(gradients_at(0));  // a good step: slots and counter no longer zero
    std::vector<Variable> state = variables;
    for (const Variable& v : optimizer->variables()) state.push_back(v);
    std::vector<Tensor> before;
    for (const Variable& v : state) before.push_back(v.value().clone());

    std::vector<Tensor> poisoned = gradients_at(1);
    std::vector<float> values = poisoned[2].to_vector<float>();
    values[3] = std::numeric_limits<float>::infinity();
    poisoned[2] = Tensor::from_vector<float>(values, kShapes[2]);
    step(poisoned);
    for (size_t i = 0; i < state.size(); ++i) {
      EXPECT_TRUE(bit_identical(state[i].value(), before[i])) << state[i].name() << " changed in a skipped step";
    }
    step(gradients_at(2));
    EXPECT_FALSE(bit_identical(state[0].value(), before[0])) << "the next finite step must update";
    EXPECT_EQ(optimizer->iterations().value().item<int64_t>(), 2);
  }
}

// The trainer's own skip: mixed_float16 with a loss scale so large that the f16 backward pass overflows.
TEST(FusedAdam, TheTrainersLossScaleSkipLeavesWeightsAndSlotsUntouched) {
  const GlobalPolicyScope policy("mixed_float16");
  nn::Sequential model({nn::InputLayer({6}), nn::Dense(8, {.activation = "relu"}), nn::Dense(3)});
  train::Trainer trainer = train::compile(model, {.optimizer = train::Adam({.learning_rate = 0.01, .fused = true}),
                                                  .loss = train::SparseCategoricalCrossentropy({.from_logits = true}),
                                                  .loss_scale = train::LossScaleOptions{.initial_scale = 256}});
  const Tensor x = random_uniform({4, 6}, -1, 1);
  const Tensor y = Tensor::from_vector<int64_t>({0, 1, 2, 0}, {4});
  const train::FitOptions options{.epochs = 1, .batch_size = 4, .shuffle = false, .verbose = 0};
  trainer.fit(x, y, options);
  std::vector<Variable> state = model.weights();
  for (const Variable& v : trainer.optimizer().variables()) state.push_back(v);
  std::vector<Tensor> before;
  for (const Variable& v : state) before.push_back(v.value().clone());
  std::vector<float> values = x.to_vector<float>();
  values[5] = std::numeric_limits<float>::infinity();
  trainer.fit(Tensor::from_vector<float>(values, {4, 6}), y, options);
  EXPECT_EQ(trainer.loss_scale()->skipped_steps(), 1);
  for (size_t i = 0; i < state.size(); ++i) {
    EXPECT_TRUE(bit_identical(state[i].value(), before[i])) << state[i].name() << " changed in a skipped step";
  }
}

// A fused run stopped after 2 epochs and resumed from its checkpoint ends where the uninterrupted
// fused run does, which is where the unfused run ends.
TEST(FusedAdam, CheckpointAndResumeEqualTheUninterruptedRun) {
  Generator data_generator(21);
  const Tensor x = random_normal({60, 8}, 0, 1, DType::kF32, Device::cpu(), &data_generator);
  const Tensor y = cast(random_uniform({60}, 0, 3, DType::kF64, Device::cpu(), &data_generator), DType::kI64);
  const train::FitOptions options{.epochs = 4, .batch_size = 16, .seed = 3, .verbose = 0};
  auto make_model = [] {
    return nn::Sequential({nn::InputLayer({8}),
                           nn::Dense(16, {.activation = "relu", .kernel_initializer = {"glorot_uniform", 1}}),
                           nn::Dense(3, {.kernel_initializer = {"glorot_uniform", 2}})});
  };
  auto compile = [](nn::Sequential& model, bool fused) {
    return train::compile(model, {.optimizer = train::AdamW({.learning_rate = 0.01, .fused = fused}),
                                  .loss = train::SparseCategoricalCrossentropy({.from_logits = true})});
  };
  std::vector<double> straight[2];
  for (const bool fused : {false, true}) {
    nn::Sequential model = make_model();
    train::Trainer trainer = compile(model, fused);
    trainer.fit(x, y, options);
    straight[fused] = flat_weights(model);
  }
  EXPECT_EQ(straight[1], straight[0]) << "fused and unfused training differ";

  TemporaryFolder folder("nimbus_fused_adam");
  const std::string path = folder / "half.safetensors";
  {
    nn::Sequential model = make_model();
    train::Trainer trainer = compile(model, true);
    train::FitOptions half = options;
    half.epochs = 2;
    trainer.fit(x, y, half);
    trainer.save_checkpoint(path);
  }
  nn::Sequential model = make_model();
  train::Trainer trainer = compile(model, true);
  const train::TrainingPosition position = trainer.restore_checkpoint(path);
  EXPECT_EQ(trainer.optimizer().iterations().value().item<int64_t>(), 2 * 4);
  trainer.fit(x, y, train::Trainer::resumed(options, position));
  EXPECT_EQ(flat_weights(model), straight[1]);
}

}  // namespace
}  // namespace nimbus::testing
