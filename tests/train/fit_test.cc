// compile / fit / evaluate / predict: gradient accumulation, graph vs eager,
// shuffling, validation, progress output, errors.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "nimbus/base/error.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/shape_ops.h"
#include "nimbus/train/trainer.h"
#include "train_test_util.h"

namespace nimbus::testing {
namespace {

// A learnable 3-class problem: labels = argmax(x W) for a fixed W.
struct Problem {
  Tensor x, y;
};

Problem make_problem(int64_t samples, uint64_t seed = 5) {
  Generator generator(seed), fixed(99);
  const Tensor x = random_normal({samples, 8}, 0, 1, DType::kF32, Device::cpu(), &generator);
  const Tensor w = random_normal({8, 3}, 0, 1, DType::kF32, Device::cpu(), &fixed);
  return {x, argmax(matmul(x, w), -1)};
}

nn::Sequential make_mlp(const std::vector<nn::Layer>& extra = {}) {
  std::vector<nn::Layer> layers = {nn::InputLayer({8}), nn::Dense(16, {.activation = "relu"})};
  layers.insert(layers.end(), extra.begin(), extra.end());
  layers.push_back(nn::Dense(3));
  return nn::Sequential(layers);
}

void copy_weights(const nn::Model& from, const nn::Model& to) {
  const auto source = from.weights(), target = to.weights();
  ASSERT_EQ(source.size(), target.size());
  for (size_t i = 0; i < source.size(); ++i) {
    Variable destination = target[i];
    destination.assign(source[i].value());
  }
}

train::CompileOptions sgd_options() {
  return {.optimizer = train::SGD({.learning_rate = 0.1, .momentum = 0.9}),
          .loss = train::SparseCategoricalCrossentropy({.from_logits = true}),
          .metrics = {"accuracy"}};
}

TEST(Fit, GradientAccumulationEqualsOneFullBatchStep) {
  const Problem data = make_problem(64);
  for (const bool cnn : {false, true}) {
    auto build = [&] {
      if (!cnn) return make_mlp();
      return nn::Sequential({nn::InputLayer({8}), nn::Reshape({2, 2, 2}),
                             nn::Conv2D(4, {2, 2}, {.padding = "same", .activation = "relu"}),
                             nn::AveragePooling2D({2, 2}), nn::Flatten(), nn::Dense(3)});
    };
    nn::Sequential full = build(), accumulated = build();
    copy_weights(full, accumulated);
    train::Trainer full_trainer = train::compile(full, sgd_options());
    train::Trainer acc_trainer = train::compile(accumulated, sgd_options());
    for (int step = 0; step < 3; ++step) {
      const train::Logs a = full_trainer.train_on_batch(data.x, data.y);
      const train::Logs b = acc_trainer.train_on_batch(data.x, data.y, 4);
      EXPECT_NEAR(a.at("loss"), b.at("loss"), 1e-5 * a.at("loss"));
      EXPECT_EQ(a.at("accuracy"), b.at("accuracy"));
    }
    const double error = relative_norm_error(flat_weights(accumulated), flat_weights(full));
    EXPECT_LE(error, 1e-5) << (cnn ? "cnn" : "mlp");
    EXPECT_GT(relative_norm_error(flat_weights(full), flat_weights(build())), 1e-3);  // they did move
  }
}

TEST(Fit, LearnsAndReportsKerasHistoryWithValidation) {
  const Problem train_data = make_problem(512), test_data = make_problem(128, 6);
  nn::Sequential model = make_mlp();
  train::Trainer trainer = train::compile(model, {.optimizer = train::Adam({.learning_rate = 0.01}),
                                                  .loss = train::SparseCategoricalCrossentropy({.from_logits = true}),
                                                  .metrics = {"accuracy"}});
  const train::History history =
      trainer.fit(train_data.x, train_data.y,
                  {.epochs = 8, .batch_size = 32, .validation_data = {{test_data.x, test_data.y}}, .verbose = 0});
  ASSERT_EQ(history.epochs, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
  for (const char* key : {"loss", "accuracy", "val_loss", "val_accuracy"}) {
    ASSERT_EQ(history.history.at(key).size(), 8u) << key;
  }
  EXPECT_LT(history.history.at("loss").back(), 0.5 * history.history.at("loss").front());
  EXPECT_GT(history.history.at("val_accuracy").back(), 0.9);
  EXPECT_EQ(history.steps, 8 * 16);
  EXPECT_EQ(history.samples, 8 * 512);
  EXPECT_GT(history.samples_per_sec, 0);
  // evaluate on the validation data gives the last epoch's validation logs.
  const train::Logs scores = trainer.evaluate(test_data.x, test_data.y, {.batch_size = 50});
  EXPECT_NEAR(scores.at("loss"), history.history.at("val_loss").back(), 1e-5);
  EXPECT_NEAR(scores.at("accuracy"), history.history.at("val_accuracy").back(), 1e-12);
  const Tensor logits = trainer.predict(test_data.x, {.batch_size = 50});
  ASSERT_EQ(logits.shape(), (Shape{128, 3}));
  const double accuracy = mean(cast(equal(argmax(logits, -1), test_data.y), DType::kF64)).item<double>();
  EXPECT_NEAR(accuracy, scores.at("accuracy"), 1e-12);
}

TEST(Fit, GraphModeTracesOnceAndMatchesEager) {
  const Problem data = make_problem(100);  // batches of 32: the last one (4) runs eagerly
  nn::Sequential graph_model = make_mlp({nn::BatchNormalization()}), eager_model = make_mlp({nn::BatchNormalization()});
  copy_weights(graph_model, eager_model);
  train::Trainer graph_trainer = train::compile(graph_model, sgd_options());
  train::Trainer eager_trainer = train::compile(eager_model, sgd_options());
  const train::History a = graph_trainer.fit(data.x, data.y, {.epochs = 2, .seed = 3, .verbose = 0, .graph = true});
  const train::History b = eager_trainer.fit(data.x, data.y, {.epochs = 2, .seed = 3, .verbose = 0, .graph = false});
  EXPECT_EQ(graph_trainer.train_step_traces(), 1);
  EXPECT_EQ(eager_trainer.train_step_traces(), 0);
  // Moving statistics (updated by assign nodes in the graph) included.
  EXPECT_LE(relative_norm_error(flat_weights(graph_model), flat_weights(eager_model)), 1e-5);
  EXPECT_NEAR(a.history.at("loss").back(), b.history.at("loss").back(), 1e-5);
  const std::vector<double> moving_mean = values_of(graph_model.layers()[1]->weights()[2].value());
  EXPECT_GT(std::abs(moving_mean[0]) + std::abs(moving_mean[1]), 0);
}

TEST(Fit, GraphModeBatchNormalizationOnImagesKeepsThePopulationStatistics) {
  // BatchNormalization first, momentum 0: after a graph-mode step on the whole set as one batch the
  // moving statistics are the set's per-channel mean and biased variance, and inference (moving
  // statistics) gives what training (batch statistics) gave.
  Generator generator(4);
  const Tensor x = random_normal({16, 5, 5, 3}, 0, 1, DType::kF32, Device::cpu(), &generator) * 2.0 + 3.0;
  const Tensor y = Tensor::from_vector<int64_t>(std::vector<int64_t>(16, 1), {16});
  nn::Layer bn = nn::BatchNormalization({.momentum = 0, .epsilon = 1e-3});
  nn::Sequential model({nn::InputLayer({5, 5, 3}), bn, nn::Conv2D(2, {3, 3}), nn::Flatten(), nn::Dense(3)});
  train::Trainer trainer = train::compile(model, sgd_options());
  (void)trainer.fit(x, y, {.epochs = 1, .batch_size = 16, .shuffle = false, .verbose = 0, .graph = true});
  EXPECT_EQ(trainer.train_step_traces(), 1);
  EXPECT_LT(relative_error(bn.weights()[2].value(), mean(x, {0, 1, 2})), 1e-5);
  EXPECT_LT(relative_error(bn.weights()[3].value(), variance(x, {0, 1, 2})), 1e-4);
  const Tensor normalized_training = bn(x, true), normalized_inference = bn(x, false);
  EXPECT_LT(relative_error(normalized_inference, normalized_training), 1e-4);
}

TEST(Fit, ShufflesWithTheSeed) {
  const Problem data = make_problem(96);
  auto train_with = [&](uint64_t seed, bool shuffle) {
    nn::Sequential model({nn::InputLayer({8}), nn::Dense(3, {.kernel_initializer = {"glorot_uniform", 1}})});
    train::Trainer trainer = train::compile(model, sgd_options());
    trainer.fit(data.x, data.y, {.epochs = 2, .batch_size = 16, .shuffle = shuffle, .seed = seed, .verbose = 0});
    return flat_weights(model);
  };
  const auto a = train_with(1, true), b = train_with(1, true), c = train_with(2, true), d = train_with(1, false);
  EXPECT_EQ(a, b);
  EXPECT_GT(relative_norm_error(a, c), 1e-4);
  EXPECT_GT(relative_norm_error(a, d), 1e-4);
}

TEST(Fit, RegularizationIsPartOfTheLoss) {
  const Problem data = make_problem(16);
  nn::Sequential model({nn::InputLayer({8}), nn::Dense(3, {.kernel_regularizer = nn::L2(0.5)})});
  train::Trainer trainer = train::compile(model, sgd_options());
  (void)model(data.x);
  const double data_loss =
      train::SparseCategoricalCrossentropy({.from_logits = true})(data.y, model(data.x)).item<double>();
  const double penalty = model.regularization_loss().item<double>();
  EXPECT_GT(penalty, 0.1);
  EXPECT_NEAR(trainer.train_on_batch(data.x, data.y).at("loss"), data_loss + penalty, 1e-5);
}

TEST(Fit, PrintsKerasProgressLines) {
  const Problem data = make_problem(100), val = make_problem(20, 8);
  nn::Sequential model = make_mlp();
  train::Trainer trainer = train::compile(model, sgd_options());
  std::ostringstream out;
  trainer.fit(data.x, data.y,
              {.epochs = 2, .batch_size = 25, .validation_data = {{val.x, val.y}}, .verbose = 1, .output = &out});
  const std::string text = out.str();
  const std::regex line(
      R"(Epoch 2/2\n4/4 \[==============================\] - \d+s \d+(ms|us|s)/step - loss: \d\.\d{4} - accuracy: \d\.\d{4} - val_loss: \d\.\d{4} - val_accuracy: \d\.\d{4}\n$)");
  EXPECT_TRUE(std::regex_search(text, line)) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos);  // not a terminal: plain lines
  EXPECT_EQ(text.rfind("Epoch 1/2\n", 0), 0u) << text;
}

TEST(Fit, RejectsBadArguments) {
  const Problem data = make_problem(64);
  nn::Sequential model = make_mlp();
  train::Trainer trainer = train::compile(model, sgd_options());
  try {
    trainer.fit(data.x, data.y, {.batch_size = 100, .gradient_accumulation = 3, .verbose = 0});
    FAIL() << "no error";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.message()).find("batch_size 100 is not divisible by gradient_accumulation 3"),
              std::string::npos);
    EXPECT_EQ(error.hint(), "use batch_size 99 or 102");
  }
  EXPECT_THROW(trainer.fit(data.x, slice(data.y, {0}, {10}), {.verbose = 0}), InvalidArgument);
  EXPECT_THROW(train::compile(model, {.optimizer = nullptr, .loss = train::MeanSquaredError()}), InvalidArgument);
  EXPECT_THROW(train::compile(model, {.optimizer = train::SGD()}), InvalidArgument);
}

TEST(Fit, AMovedTrainerKeepsTraining) {
  const Problem data = make_problem(64);
  nn::Sequential model = make_mlp();
  std::vector<train::Trainer> trainers;
  trainers.push_back(train::compile(model, sgd_options()));
  const double first = trainers[0].train_on_batch(data.x, data.y).at("loss");
  trainers.reserve(8);  // moves the trainer: its traced steps captured the old address
  double last = first;
  for (int i = 0; i < 5; ++i) last = trainers[0].train_on_batch(data.x, data.y).at("loss");
  EXPECT_LT(last, first);
  EXPECT_EQ(trainers[0].train_step_traces(), 2);  // traced again after the move
  EXPECT_EQ(trainers[0].optimizer().iterations().value().item<int64_t>(), 6);
}

TEST(Fit, CallbacksCanStopTraining) {
  struct StopAfterTwo : train::Callback {
    std::vector<int> seen;
    void on_epoch_end(train::Trainer& trainer, int epoch, const train::Logs& logs) override {
      seen.push_back(epoch);
      EXPECT_TRUE(logs.count("loss"));
      if (epoch == 2) trainer.stop_training = true;
    }
  };
  const Problem data = make_problem(32);
  nn::Sequential model = make_mlp();
  train::Trainer trainer = train::compile(model, sgd_options());
  auto callback = std::make_shared<StopAfterTwo>();
  const train::History history =
      trainer.fit(data.x, data.y, {.epochs = 10, .initial_epoch = 0, .verbose = 0, .callbacks = {callback}});
  EXPECT_EQ(callback->seen, (std::vector<int>{1, 2}));
  EXPECT_EQ(history.epochs.size(), 2u);
}

}  // namespace
}  // namespace nimbus::testing
