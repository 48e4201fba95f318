// Training checkpoints: a run stopped after epoch 2 and resumed from its checkpoint ends with
// the same weights, bit for bit, as the run that never stopped (dropout's random stream included).
#include <gtest/gtest.h>

#include <filesystem>

#include "nimbus/base/error.h"
#include "nimbus/base/rng.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/tensor/safetensors.h"
#include "nimbus/train/trainer.h"
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

TEST(Checkpoint, StoppedAndResumedRunEqualsTheUninterruptedOne) {
  Generator data_generator(21);
  const Tensor x = random_normal({100, 8}, 0, 1, DType::kF32, Device::cpu(), &data_generator);
  const Tensor y = argmax(matmul(x, random_normal({8, 3}, 0, 1, DType::kF32, Device::cpu(), &data_generator)), -1);
  const train::FitOptions options{.epochs = 4, .batch_size = 16, .seed = 3, .verbose = 0};
  const std::string path = (std::filesystem::temp_directory_path() / "nimbus_checkpoint_test.safetensors").string();

  manual_seed(7);
  TrainingRun straight;
  straight.trainer.fit(x, y, options);

  manual_seed(7);
  std::vector<double> resumed_weights;
  {
    TrainingRun first;
    train::FitOptions half = options;
    half.epochs = 2;
    first.trainer.fit(x, y, half);
    first.trainer.save_checkpoint(path, 2);
  }
  manual_seed(12345);  // a new process: other random state, fresh model and trainer
  TrainingRun second;
  const int epochs_done = second.trainer.restore_checkpoint(path);
  EXPECT_EQ(epochs_done, 2);
  EXPECT_EQ(second.trainer.optimizer().iterations().value().item<int64_t>(), 2 * 7);
  train::FitOptions rest = options;
  rest.initial_epoch = epochs_done;
  const train::History history = second.trainer.fit(x, y, rest);
  EXPECT_EQ(history.epochs, (std::vector<int>{3, 4}));
  EXPECT_EQ(flat_weights(second.model), flat_weights(straight.model));
  EXPECT_GT(relative_norm_error(flat_weights(second.model), flat_weights(TrainingRun().model)), 1e-3);  // it trained

  // A checkpoint of another model is refused with the tensor named.
  nn::Sequential other({nn::InputLayer({8}), nn::Dense(4)});
  train::Trainer other_trainer = train::compile(other, {.optimizer = train::Adam(), .loss = train::MeanSquaredError()});
  EXPECT_THROW(other_trainer.restore_checkpoint(path), DataError);
  write_safetensors(path, {{"x", Tensor::scalar<float>(1)}});
  EXPECT_THROW(second.trainer.restore_checkpoint(path), DataError);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace nimbus::testing
