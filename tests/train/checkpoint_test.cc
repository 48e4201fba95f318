// Training checkpoints: a run stopped (after an epoch, or in the middle of one) and resumed from
// its checkpoint ends with the same weights, bit for bit, as the run that never stopped (dropout's
// random stream included); corrupted files are refused by their checksum and the previous
// checkpoint is used; ModelCheckpoint's filepath, save_freq, save_best_only and max_to_keep.
#include "nimbus/train/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "nimbus/base/error.h"
#include "nimbus/base/rng.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/tensor/safetensors.h"
#include "nimbus/train/callbacks.h"
#include "nimbus/train/trainer.h"
#include "tiny_run.h"
#include "train_test_util.h"

namespace nimbus::testing {
namespace {

struct TrainingRun {
  nn::Sequential model{{nn::InputLayer({8}),
                        nn::Dense(16, {.activation = "relu", .kernel_initializer = {"glorot_uniform", 1}}),
                        nn::Dropout(0.3), nn::Dense(3, {.kernel_initializer = {"glorot_uniform", 2}})}};
  train::Trainer trainer = train::compile(model, {.optimizer = train::Adam({.learning_rate = 0.01}),
                                                  .loss = train::SparseCategoricalCrossentropy({.from_logits = true}),
                                                  .metrics = {"accuracy"}});
};

struct Data {
  Tensor x, y;
  Data() {
    Generator data_generator(21);
    x = random_normal({100, 8}, 0, 1, DType::kF32, Device::cpu(), &data_generator);
    y = argmax(matmul(x, random_normal({8, 3}, 0, 1, DType::kF32, Device::cpu(), &data_generator)), -1);
  }
};

// Interrupts fit after `step` global steps, as SIGTERM does.
class InterruptAt : public train::Callback {
 public:
  explicit InterruptAt(int64_t step) : step_(step) {}
  void on_train_batch_end(train::Trainer& trainer, int64_t, const train::Logs&) override {
    if (trainer.position().global_step == step_) trainer.interrupt_training = true;
  }

 private:
  int64_t step_;
};

// 100 samples, batch 16: 7 steps per epoch (the last one of 4 samples), 4 epochs.
const train::FitOptions kOptions{.epochs = 4, .batch_size = 16, .seed = 3, .verbose = 0};

// The run that never stops: its final weights and history.
std::pair<std::vector<double>, train::History> uninterrupted(const Data& data) {
  manual_seed(7);
  TrainingRun straight;
  const train::History history = straight.trainer.fit(data.x, data.y, kOptions);
  return {flat_weights(straight.model), history};
}

TEST(Checkpoint, StoppedAndResumedRunEqualsTheUninterruptedOne) {
  const Data data;
  TemporaryFolder folder("nimbus_checkpoint");
  const std::string path = folder / "epoch.safetensors";
  const std::vector<double> straight_weights = uninterrupted(data).first;

  manual_seed(7);
  {
    TrainingRun first;
    train::FitOptions half = kOptions;
    half.epochs = 2;
    first.trainer.fit(data.x, data.y, half);
    first.trainer.save_checkpoint(path);
  }
  manual_seed(12345);  // a new process: other random state, fresh model and trainer
  TrainingRun second;
  const train::TrainingPosition position = second.trainer.restore_checkpoint(path);
  EXPECT_EQ(position.epochs_done, 2);
  EXPECT_EQ(position.steps_in_epoch, 0);
  EXPECT_EQ(position.global_step, 2 * 7);
  EXPECT_EQ(position.samples, 2 * 100);
  EXPECT_EQ(position.shuffle_seed, 3u);
  EXPECT_EQ(second.trainer.optimizer().iterations().value().item<int64_t>(), 2 * 7);
  const train::History history = second.trainer.fit(data.x, data.y, train::Trainer::resumed(kOptions, position));
  EXPECT_EQ(history.epochs, (std::vector<int>{3, 4}));
  EXPECT_EQ(flat_weights(second.model), straight_weights);
  EXPECT_GT(relative_norm_error(flat_weights(second.model), flat_weights(TrainingRun().model)), 1e-3);  // it trained

  // A checkpoint of another model is refused with the tensor named.
  nn::Sequential other({nn::InputLayer({8}), nn::Dense(4)});
  train::Trainer other_trainer = train::compile(other, {.optimizer = train::Adam(), .loss = train::MeanSquaredError()});
  EXPECT_THROW(other_trainer.restore_checkpoint(path), DataError);
  write_safetensors(path, {{"x", Tensor::scalar<float>(1)}});
  EXPECT_THROW(second.trainer.restore_checkpoint(path), DataError);
}

TEST(Checkpoint, ResumesInTheMiddleOfAnEpochBitForBit) {
  const Data data;
  TemporaryFolder folder("nimbus_checkpoint_mid");
  const std::string path = folder / "mid.safetensors";
  const auto [straight_weights, whole] = uninterrupted(data);

  manual_seed(7);
  {
    TrainingRun first;
    train::FitOptions options = kOptions;
    options.callbacks = {std::make_shared<InterruptAt>(10)};  // step 3 of epoch 2
    const train::History cut = first.trainer.fit(data.x, data.y, options);
    EXPECT_TRUE(cut.interrupted);
    EXPECT_EQ(cut.epochs, (std::vector<int>{1}));  // epoch 2 left unfinished: no on_epoch_end
    first.trainer.save_checkpoint(path);
  }
  manual_seed(999);
  TrainingRun second;
  const train::TrainingPosition position = second.trainer.restore_checkpoint(path);
  EXPECT_EQ(position.epochs_done, 1);
  EXPECT_EQ(position.steps_in_epoch, 3);
  EXPECT_EQ(position.global_step, 10);
  EXPECT_EQ(position.samples, 100 + 3 * 16);
  const train::History rest = second.trainer.fit(data.x, data.y, train::Trainer::resumed(kOptions, position));
  EXPECT_EQ(rest.epochs, (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(rest.steps, 4 + 7 + 7);
  EXPECT_EQ(flat_weights(second.model), straight_weights);
  // The resumed epoch's logs count the steps before the checkpoint too (its metric totals were saved).
  EXPECT_EQ(rest.history.at("loss")[0], whole.history.at("loss")[1]);
  EXPECT_EQ(rest.history.at("accuracy")[0], whole.history.at("accuracy")[1]);
  EXPECT_EQ(second.trainer.position().global_step, 4 * 7);
}

// Flips one byte of the file's tensor data.
void corrupt(const std::string& path) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(-5, std::ios::end);
  const char byte = static_cast<char>(file.get());
  file.seekp(-5, std::ios::end);
  file.put(static_cast<char>(byte ^ 0x10));
}

TEST(Checkpoint, CorruptedFileIsRefusedAndThePreviousOneIsUsed) {
  const Data data;
  TemporaryFolder folder("nimbus_checkpoint_corrupt");
  TrainingRun run;
  run.trainer.fit(data.x, data.y,
                  {.epochs = 2,
                   .batch_size = 16,
                   .verbose = 0,
                   .callbacks = {train::ModelCheckpoint({.filepath = folder / "ckpt-{step:04d}.safetensors"})}});
  const std::string older = folder / "ckpt-0007.safetensors", newer = folder / "ckpt-0014.safetensors";
  EXPECT_EQ(train::verify_checkpoint(newer).global_step, 14);
  corrupt(newer);
  try {
    train::verify_checkpoint(newer);
    ADD_FAILURE() << "a corrupted checkpoint passed its checksum";
  } catch (const DataError& error) {
    EXPECT_NE(std::string(error.what()).find(newer + ": checksum mismatch"), std::string::npos) << error.what();
  }
  EXPECT_THROW(run.trainer.restore_checkpoint(newer), DataError);

  TrainingRun fresh;
  std::ostringstream warnings;
  const train::CheckpointInfo restored =
      train::restore_latest_checkpoint(fresh.trainer, folder.path.string(), warnings);
  EXPECT_EQ(restored.path, older);
  EXPECT_EQ(restored.position.global_step, 7);
  EXPECT_NE(warnings.str().find("refusing checkpoint " + newer + ": checksum mismatch"), std::string::npos)
      << warnings.str();
  EXPECT_EQ(fresh.trainer.optimizer().iterations().value().item<int64_t>(), 7);

  // A torn file (cut short) is refused too, and with nothing intact left, resuming is a NotFound.
  std::filesystem::resize_file(older, std::filesystem::file_size(older) / 2);
  EXPECT_THROW(train::verify_checkpoint(older), DataError);
  std::ostringstream more;
  EXPECT_THROW(train::restore_latest_checkpoint(fresh.trainer, folder.path.string(), more), NotFound);
}

TEST(Checkpoint, ModelCheckpointFillsFilepathAndKeepsTheNewest) {
  const Data data;
  TemporaryFolder folder("nimbus_model_checkpoint");
  TrainingRun run;
  // Every 3 steps over 3 epochs of 7: steps 3, 6, ..., 21; the newest 2 kept.
  run.trainer.fit(
      data.x, data.y,
      {.epochs = 3,
       .batch_size = 16,
       .validation_data = {{data.x, data.y}},
       .verbose = 0,
       .callbacks = {
           train::ModelCheckpoint(
               {.filepath = folder / "steps/s-{step}-e{epoch}.safetensors", .save_freq = 3, .max_to_keep = 2}),
           // "Best" by a rising loss: only the first epoch qualifies.
           train::ModelCheckpoint({.filepath = folder / "best-{epoch:02d}-{val_loss:.3f}.safetensors",
                                   .monitor = "loss",
                                   .save_best_only = true,
                                   .mode = "max"})}});
  std::vector<std::string> steps;
  for (const auto& entry : std::filesystem::directory_iterator(folder / "steps"))
    steps.push_back(entry.path().filename());
  std::sort(steps.begin(), steps.end());
  EXPECT_EQ(steps, (std::vector<std::string>{"s-18-e3.safetensors", "s-21-e3.safetensors"}));
  int best = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder.path)) {
    const std::string name = entry.path().filename();
    if (name.rfind("best-", 0) != 0) continue;
    ++best;
    EXPECT_TRUE(name.rfind("best-01-", 0) == 0) << name;
    EXPECT_EQ(train::verify_checkpoint(entry.path()).epochs_done, 1);
  }
  EXPECT_EQ(best, 1);

  // A resumed run's callback counts the files already there towards max_to_keep.
  run.trainer.fit(
      data.x, data.y,
      {.epochs = 4,
       .batch_size = 16,
       .initial_epoch = 3,
       .verbose = 0,
       .callbacks = {train::ModelCheckpoint(
           {.filepath = folder / "steps/s-{step}-e{epoch}.safetensors", .save_freq = 3, .max_to_keep = 2})}});
  steps.clear();
  for (const auto& entry : std::filesystem::directory_iterator(folder / "steps"))
    steps.push_back(entry.path().filename());
  std::sort(steps.begin(), steps.end());
  EXPECT_EQ(steps, (std::vector<std::string>{"s-24-e4.safetensors", "s-27-e4.safetensors"}));
  EXPECT_THROW(train::ModelCheckpoint({.filepath = ""}), InvalidArgument);
}

}  // namespace
}  // namespace nimbus::testing
