// Golden test against PyTorch (CONVENTIONS.md, point 8): a tiny MLP and a
// tiny CNN shaped like the peers' models. tests/golden/train_golden.json
// (tests/golden/make_train_golden.py, torch in float64, Nimbus's layouts)
// holds the initial weights, a batch, the logits, the loss, every parameter's
// gradient and 10 Adam steps' losses; Nimbus rebuilds each model with
// nn::Sequential, loads the weights, and checks every item in f32 with
// relative error <= 1e-4 (max |actual - expected| / max |expected| per tensor).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "nimbus/autodiff/gradient_tape.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/train/trainer.h"
#include "train_test_util.h"

namespace nimbus::testing {
namespace {

constexpr int kGoldenVersion = 1;
constexpr double kTolerance = 1e-4;

const nlohmann::json& golden() {
  static const nlohmann::json file = [] {
    std::ifstream in(NIMBUS_GOLDEN_DIR "/train_golden.json");
    EXPECT_TRUE(in.good()) << "cannot open train_golden.json";
    return nlohmann::json::parse(in);
  }();
  return file;
}

Shape shape_of(const nlohmann::json& entry) {
  const std::vector<int64_t> dims = entry.at("shape").get<std::vector<int64_t>>();
  return Shape(std::span<const int64_t>(dims));
}

Tensor tensor_of(const nlohmann::json& entry) {
  return Tensor::from_vector<double>(entry.at("values").get<std::vector<double>>(), shape_of(entry)).to(DType::kF32);
}

nn::Sequential build(const std::string& which, const Shape& input) {
  nn::reset_layer_names();
  const nn::Dims sample(input.begin() + 1, input.end());
  if (which == "mlp") {
    return nn::Sequential({nn::InputLayer(sample), nn::Flatten(), nn::Dense(16, {.activation = "relu"}),
                           nn::Dense(8, {.activation = "relu"}), nn::Dense(5)});
  }
  return nn::Sequential({nn::InputLayer(sample), nn::Conv2D(4, {3, 3}, {.padding = "same", .activation = "relu"}),
                         nn::MaxPooling2D({2, 2}), nn::Conv2D(6, {3, 3}, {.padding = "same", .activation = "relu"}),
                         nn::MaxPooling2D({2, 2}), nn::Flatten(), nn::Dense(8, {.activation = "relu"}), nn::Dense(5)});
}

class TrainGolden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_EQ(golden().at("version").get<int>(), kGoldenVersion);
    entry_ = golden().at("models").at(GetParam());
    x_ = tensor_of(entry_.at("input"));
    labels_ = Tensor::from_vector<int64_t>(entry_.at("labels").get<std::vector<int64_t>>(), {x_.dim(0)});
    model_ = std::make_unique<nn::Sequential>(build(GetParam(), x_.shape()));
    std::vector<Variable> weights = model_->trainable_weights();
    const auto& params = entry_.at("params");
    ASSERT_EQ(weights.size(), params.size());
    for (size_t i = 0; i < weights.size(); ++i) {
      ASSERT_EQ(weights[i].name(), params[i].at("name").get<std::string>());
      ASSERT_EQ(weights[i].shape(), shape_of(params[i])) << weights[i].name();
      weights[i].assign(tensor_of(params[i]));
    }
  }

  nlohmann::json entry_;
  Tensor x_, labels_;
  std::unique_ptr<nn::Sequential> model_;
};

TEST_P(TrainGolden, LogitsLossAndEveryGradient) {
  const std::vector<Variable> weights = model_->trainable_weights();
  GradientTape tape;
  const Tensor logits = (*model_)(x_, true);
  const Tensor loss = train::SparseCategoricalCrossentropy({.from_logits = true})(labels_, logits);
  const std::vector<Tensor> grads = tape.gradient(loss, weights);
  EXPECT_LE(relative_error(logits, tensor_of(entry_.at("logits"))), kTolerance);
  EXPECT_LE(relative_error({loss.item<double>()}, {entry_.at("loss").get<double>()}), kTolerance);
  const auto& expected = entry_.at("grads");
  for (size_t i = 0; i < weights.size(); ++i) {
    const Tensor want = tensor_of(expected[i]);
    EXPECT_GT(values_of(sum(abs(want))).front(), 0) << "an all-zero golden gradient proves nothing";
    EXPECT_LE(relative_error(grads[i], want), kTolerance) << weights[i].name();
  }
}

TEST_P(TrainGolden, AdamTrajectoryInGraphMode) {
  const auto& adam = entry_.at("adam");
  train::Trainer trainer =
      train::compile(*model_, {.optimizer = train::Adam({.learning_rate = adam.at("learning_rate").get<double>(),
                                                         .beta_1 = adam.at("beta_1").get<double>(),
                                                         .beta_2 = adam.at("beta_2").get<double>(),
                                                         .epsilon = adam.at("epsilon").get<double>()}),
                               .loss = train::SparseCategoricalCrossentropy({.from_logits = true})});
  const std::vector<double> expected = adam.at("losses").get<std::vector<double>>();
  std::vector<double> losses;
  for (size_t step = 0; step < expected.size(); ++step)
    losses.push_back(trainer.train_on_batch(x_, labels_).at("loss"));
  EXPECT_EQ(trainer.train_step_traces(), 1);
  for (size_t step = 0; step < expected.size(); ++step) {
    EXPECT_LE(std::abs(losses[step] - expected[step]) / std::abs(expected[step]), kTolerance) << "step " << step;
  }
  EXPECT_LT(losses.back(), 0.9 * losses.front());
}

INSTANTIATE_TEST_SUITE_P(Models, TrainGolden, ::testing::Values("mlp", "cnn"));

}  // namespace
}  // namespace nimbus::testing
