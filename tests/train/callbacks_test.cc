// Callbacks: early stopping (with best weights), learning-rate changes seen by traced steps,
// CSV rows, stopping on NaN.
#include "nimbus/train/callbacks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "nimbus/base/error.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/creation.h"
#include "train_test_util.h"

namespace nimbus::testing {
namespace {

// Records the optimizer's rate at each epoch's end.
struct RecordRates : train::Callback {
  std::vector<double> rates;
  void on_epoch_end(train::Trainer& trainer, int, const train::Logs&) override {
    rates.push_back(trainer.optimizer().current_learning_rate());
  }
};

// Wraps a callback so it sees `val_score` = values[epoch - 1].
struct Scripted : train::Callback {
  std::shared_ptr<train::Callback> inner;
  std::vector<double> values;
  void on_train_begin(train::Trainer& t) override { inner->on_train_begin(t); }
  void on_epoch_begin(train::Trainer& t, int e) override { inner->on_epoch_begin(t, e); }
  void on_epoch_end(train::Trainer& t, int e, const train::Logs& logs) override {
    train::Logs scripted = logs;
    scripted["val_score"] = values.at(static_cast<size_t>(e - 1));
    inner->on_epoch_end(t, e, scripted);
  }
};

struct TinyRegression {
  Tensor x = random_normal({32, 4}, 0, 1);
  Tensor y = zeros({32, 1});
  nn::Sequential model{{nn::InputLayer({4}), nn::Dense(1, {.kernel_initializer = {"glorot_uniform", 3}})}};
  train::Trainer trainer =
      train::compile(model, {.optimizer = train::SGD({.learning_rate = 0.1}), .loss = train::MeanSquaredError()});
};

TEST(Callbacks, EarlyStoppingWaitsPatienceEpochsAndRestoresBestWeights) {
  TinyRegression s;
  auto scripted = std::make_shared<Scripted>();
  scripted->inner =
      train::EarlyStopping({.monitor = "val_score", .patience = 2, .mode = "max", .restore_best_weights = true});
  scripted->values = {0.5, 0.7, 0.6, 0.65, 0.9, 0.95};
  std::vector<double> weights_after_epoch_2;
  struct Snapshot : train::Callback {
    std::vector<double>* out;
    void on_epoch_end(train::Trainer& t, int e, const train::Logs&) override {
      if (e == 2) *out = values_of(t.model().weights()[0].value());
    }
  };
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->out = &weights_after_epoch_2;
  const train::History history =
      s.trainer.fit(s.x, s.y, {.epochs = 6, .verbose = 0, .callbacks = {snapshot, scripted}});
  EXPECT_EQ(history.epochs, (std::vector<int>{1, 2, 3, 4}));  // best at 2, no gain in 3 and 4
  EXPECT_EQ(values_of(s.model.weights()[0].value()), weights_after_epoch_2);
  EXPECT_THROW(s.trainer.fit(s.x, s.y, {.epochs = 1, .verbose = 0, .callbacks = {train::EarlyStopping()}}),
               InvalidArgument);  // no val_loss without validation data
}

TEST(Callbacks, ReduceLROnPlateauAndSchedulerReachTheTracedStep) {
  TinyRegression s;
  auto scripted = std::make_shared<Scripted>();
  scripted->inner = train::ReduceLROnPlateau({.monitor = "val_score", .factor = 0.5, .patience = 1, .mode = "min"});
  scripted->values = {1.0, 1.0, 1.0, 0.5};
  auto record = std::make_shared<RecordRates>();
  s.trainer.fit(s.x, s.y, {.epochs = 4, .verbose = 0, .callbacks = {scripted, record}});
  EXPECT_EQ(record->rates, (std::vector<double>{0.1, 0.05, 0.025, 0.025}));

  // The traced step reads the new rate: one SGD step with rate r moves w by r * gradient.
  TinyRegression t;
  auto scheduler = train::LearningRateScheduler([](int epoch, double) { return epoch == 0 ? 0.0 : 0.1; });
  const std::vector<double> before = flat_weights(t.model);
  t.trainer.fit(t.x, t.y, {.epochs = 1, .batch_size = 32, .verbose = 0, .callbacks = {scheduler}});
  EXPECT_EQ(flat_weights(t.model), before);  // epoch 1 ran at rate 0
  t.trainer.fit(t.x, t.y, {.epochs = 2, .batch_size = 32, .initial_epoch = 1, .verbose = 0, .callbacks = {scheduler}});
  EXPECT_NE(flat_weights(t.model), before);  // epoch 2 at rate 0.1, through the same traced step
  EXPECT_EQ(t.trainer.train_step_traces(), 1);
  EXPECT_THROW(train::SGD({.learning_rate = train::ExponentialDecay({})})->set_learning_rate(0.1), InvalidArgument);
}

TEST(Callbacks, CSVLoggerWritesOneRowPerEpoch) {
  TinyRegression s;
  const std::string path = (std::filesystem::temp_directory_path() / "nimbus_csv_logger_test.csv").string();
  s.trainer.fit(s.x, s.y, {.epochs = 3, .verbose = 0, .callbacks = {train::CSVLogger(path)}});
  std::ifstream in(path);
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header, "epoch,loss");
  std::vector<std::string> rows;
  while (std::getline(in, line)) rows.push_back(line);
  std::filesystem::remove(path);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].rfind("2,", 0), 0u) << rows[2];
  EXPECT_GT(std::stod(rows[0].substr(2)), std::stod(rows[2].substr(2)));  // the loss fell
}

TEST(Callbacks, TerminateOnNaNStopsAtTheFirstBadBatch) {
  TinyRegression s;
  std::vector<float> values(32 * 4, 1.0f);
  values[4 * 20] = std::numeric_limits<float>::quiet_NaN();  // sample 20: batch 2 of 4 (batch size 8)
  const Tensor x = Tensor::from_vector<float>(values, {32, 4});
  struct Count : train::Callback {
    int64_t batches = 0;
    void on_train_batch_end(train::Trainer&, int64_t, const train::Logs&) override { ++batches; }
  };
  auto count = std::make_shared<Count>();
  const train::History history = s.trainer.fit(
      x, s.y,
      {.epochs = 3, .batch_size = 8, .shuffle = false, .verbose = 0, .callbacks = {train::TerminateOnNaN(), count}});
  EXPECT_EQ(count->batches, 3);
  EXPECT_EQ(history.epochs.size(), 1u);
  EXPECT_TRUE(std::isnan(history.history.at("loss").back()));
}

}  // namespace
}  // namespace nimbus::testing
