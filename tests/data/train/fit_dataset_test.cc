// Trainer::fit(dataset): a run stopped in the middle of an epoch and resumed from its checkpoint
// (the input iterator's position inside) ends with the same weights, bit for bit, as a run that
// never stopped; a step faster than its pipeline shows the wait, and prefetch with a parallel map
// shrinks it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "nimbus/base/rng.h"
#include "nimbus/data/dataset.h"
#include "nimbus/device/runtime.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/train/trainer.h"

namespace nimbus::train {
namespace {

using data::Dataset;
using data::Element;

struct TrainingRun {
  nn::Sequential model{{nn::InputLayer({8}),
                        nn::Dense(16, {.activation = "relu", .kernel_initializer = {"glorot_uniform", 1}}),
                        nn::Dense(3, {.kernel_initializer = {"glorot_uniform", 2}})}};
  Trainer trainer = compile(model, {.optimizer = Adam({.learning_rate = 0.01}),
                                    .loss = SparseCategoricalCrossentropy({.from_logits = true}),
                                    .metrics = {"accuracy"}});
};

std::pair<Tensor, Tensor> samples(int64_t count) {
  Generator generator(21);
  Tensor x = random_normal({count, 8}, 0, 1, DType::kF32, Device::cpu(), &generator);
  Tensor y = argmax(matmul(x, random_normal({8, 3}, 0, 1, DType::kF32, Device::cpu(), &generator)), -1);
  return {x, y};
}

// Halves x on the pipeline's threads: a map whose calls run in parallel.
Element halve(const Element& e) {
  Tensor x = data::host_tensor(e[0].shape(), DType::kF32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = e[0].data<float>()[i] * 0.5f;
  return {x, e[1]};
}

// Shuffled, parallel-mapped, batched, prefetched: 200 samples in 13 batches (the last of 8).
// Each call builds a new Dataset, as a new process would.
Dataset pipeline() {
  const auto [x, y] = samples(200);
  return Dataset::from_tensor_slices({x, y}).shuffle(64, 5).map(halve, 2).batch(16).prefetch(3);
}

class InterruptAt : public Callback {
 public:
  explicit InterruptAt(int64_t global_step) : step_(global_step) {}
  void on_train_batch_end(Trainer& trainer, int64_t, const Logs&) override {
    if (trainer.position().global_step == step_) trainer.interrupt_training = true;
  }

 private:
  int64_t step_;
};

void expect_same_weights(const nn::Model& a, const nn::Model& b) {
  const auto wa = a.weights(), wb = b.weights();
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i) {
    const Tensor ta = wa[i].value(), tb = wb[i].value();
    ASSERT_EQ(ta.nbytes(), tb.nbytes());
    EXPECT_EQ(std::memcmp(ta.raw_data(), tb.raw_data(), ta.nbytes()), 0) << wa[i].name();
  }
}

TEST(FitDataset, ResumedMidEpochMatchesTheUninterruptedRunBitForBit) {
  configure_runtime({.threads = 1, .deterministic = true, .seed = 1});
  const FitOptions options{.epochs = 3, .seed = 9, .verbose = 0};

  TrainingRun uninterrupted;
  const History full = uninterrupted.trainer.fit(pipeline(), options);
  EXPECT_EQ(full.steps, 3 * 13);

  // Stopped at step 5 of epoch 2, its checkpoint written.
  const std::string path = (std::filesystem::temp_directory_path() / "nimbus_fit_dataset_resume.safetensors").string();
  {
    TrainingRun first;
    FitOptions stopping = options;
    stopping.callbacks = {std::make_shared<InterruptAt>(13 + 5)};
    const History part = first.trainer.fit(pipeline(), stopping);
    ASSERT_TRUE(part.interrupted);
    ASSERT_EQ(first.trainer.position().steps_in_epoch, 5);
    first.trainer.save_checkpoint(path);
  }

  TrainingRun resumed;
  (void)resumed.model(samples(1).first, false);  // built, so the checkpoint's weights have a home
  const TrainingPosition position = resumed.trainer.restore_checkpoint(path);
  EXPECT_EQ(position.epochs_done, 1);
  EXPECT_EQ(position.steps_in_epoch, 5);
  ASSERT_NE(position.input_iterator.find("nimbus.data.iterator/1"), std::string::npos) << position.input_iterator;
  const History rest = resumed.trainer.fit(pipeline(), Trainer::resumed(options, position));
  EXPECT_EQ(rest.steps, 13 - 5 + 13);
  expect_same_weights(uninterrupted.model, resumed.model);
  EXPECT_EQ(rest.history.at("loss").back(), full.history.at("loss").back());

  // Each epoch is another iteration: another order, so not the same weights as a run whose
  // epochs all saw the first order (the test above would pass trivially if the order never changed).
  const Tensor first_epoch = pipeline().iterator(9, 0).next()->at(1);
  const Tensor second_epoch = pipeline().iterator(9, 1).next()->at(1);
  EXPECT_NE(std::memcmp(first_epoch.raw_data(), second_epoch.raw_data(), first_epoch.nbytes()), 0);
}

// x, y in batches of 8, each element taking `element_ms` in its map (sleeping: it needs no core).
Dataset slow_pipeline(int parallel_calls, int64_t prefetch) {
  const auto [x, y] = samples(96);
  Dataset ds = Dataset::from_tensor_slices({x, y}).map(
      [](const Element& e) {
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
        return e;
      },
      parallel_calls);
  ds = ds.batch(8);
  return prefetch > 0 ? ds.prefetch(prefetch) : ds;
}

double input_wait_seconds(const Dataset& ds, nlohmann::json* stats = nullptr) {
  TrainingRun run;
  const History history = run.trainer.fit(ds, {.epochs = 1, .verbose = 0});
  EXPECT_EQ(history.steps, 12);
  if (stats) *stats = nlohmann::json::parse(history.input_pipeline_stats);
  return run.trainer.profiler().totals().spans[monitor::Span::kInputWait];
}

TEST(FitDataset, PrefetchAndParallelMapShrinkTheInputWait) {
  configure_runtime({.threads = 1, .seed = 1});
  nlohmann::json sequential_stats, parallel_stats;
  const double sequential = input_wait_seconds(slow_pipeline(1, 0), &sequential_stats);
  const double overlapped = input_wait_seconds(slow_pipeline(2, 4), &parallel_stats);
  // 96 elements of 3 ms on the consumer's thread: the steps (well under a millisecond each) wait
  // for nearly all of it.
  EXPECT_GT(sequential, 0.8 * 96 * 0.003);
  EXPECT_GT(sequential_stats.at("wait_ns").get<int64_t>(), 0.8 * 96 * 3e6);
  // Two calls at a time, read ahead while the steps compute: at most 3/4 of the wait (about 1/2
  // from the parallel map alone).
  EXPECT_LT(overlapped, 0.75 * sequential) << "sequential " << sequential << " s, overlapped " << overlapped << " s";
  bool saw_parallel_map = false;
  for (const auto& node : parallel_stats.at("nodes")) {
    if (node.at("name") == "map" && node.at("parallelism") == 2) saw_parallel_map = true;
  }
  EXPECT_TRUE(saw_parallel_map) << parallel_stats.dump();
}

}  // namespace
}  // namespace nimbus::train
