// fit's one-batch look-ahead (FitOptions::prefetch_to_device, src/train/device_batches.h), checked
// without a GPU on the logical device cpu:1, where batches go through an uploader as on CUDA: the
// runs with and without it must agree bit for bit (losses, metrics, weights, positions) across epoch
// ends, with a callback that stops mid-epoch, with steps_per_epoch shorter than the data, and when
// the input pipeline fails. The uploader registered here for CPU devices copies as the default one
// does and records, for each batch, how many steps the device had been given and how many of their
// outputs the host had read: the proof that batch N+1 goes up before step N's loss comes back.
// tests/gpu/batch_uploader_test.cc checks on a GPU that the real uploader's copy overlaps a step.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nimbus/data/dataset.h"
#include "nimbus/device/logical_devices.h"
#include "nimbus/device/runtime.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/tensor/batch_upload.h"
#include "nimbus/train/trainer.h"

namespace nimbus::train {
namespace {

// What happened, in order: "upload B: L launched, R read" for the x tensor of batch B (the batch's
// first sample holds its index), and "end E.S" for on_train_batch_end of epoch E's step S. L is
// the optimizer's step counter, on the device: the steps launched. R is the loss scale's count of
// finite steps, which the host updates from each step's outputs as it reads them: the steps read.
struct EventLog {
  Trainer* trainer = nullptr;
  int64_t batch_size = 1;
  std::vector<std::string> events;
};
EventLog* recording = nullptr;  // the running fit's log; null: plain copies

// Records into `log` while in scope.
struct Recording {
  explicit Recording(EventLog& log) { recording = &log; }
  ~Recording() { recording = nullptr; }
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;
};

class RecordingUpload final : public BatchUpload {
 public:
  explicit RecordingUpload(Device device) : device_(device) {}
  Tensor upload(const Tensor& host) override {
    if (recording != nullptr && host.dtype() == DType::kF32) {
      Trainer& trainer = *recording->trainer;
      const Variable& iterations = trainer.optimizer().iterations();
      const int64_t launched = iterations.defined() ? iterations.value().to(Device::cpu()).item<int64_t>() : 0;
      const auto batch = static_cast<int64_t>(host.to_vector<float>()[0]) / recording->batch_size;
      recording->events.push_back(
          fmt::format("upload {}: {} launched, {} read", batch, launched, trainer.loss_scale()->good_steps()));
    }
    return host.to(device_);
  }

 private:
  Device device_;
};

class RecordBatchEnds : public Callback {
 public:
  void on_epoch_begin(Trainer&, int epoch) override { epoch_ = epoch; }
  void on_train_batch_end(Trainer&, int64_t step, const Logs& logs) override {
    if (recording != nullptr) recording->events.push_back(fmt::format("end {}.{}", epoch_, step));
    this->logs.push_back(logs);
  }
  std::vector<Logs> logs;

 private:
  int epoch_ = 0;
};

// Sets stop_training (or interrupt_training) after step `step` of epoch `epoch`, and halves the
// learning rate after step 0 of every epoch: both must act at the same step with the look-ahead.
class StopAt : public Callback {
 public:
  StopAt(int epoch, int64_t step, bool interrupt) : epoch_(epoch), step_(step), interrupt_(interrupt) {}
  void on_epoch_begin(Trainer&, int epoch) override { current_ = epoch; }
  void on_train_batch_end(Trainer& trainer, int64_t step, const Logs&) override {
    if (step == 0) trainer.optimizer().set_learning_rate(trainer.optimizer().current_learning_rate() / 2);
    positions.push_back(trainer.position().input_iterator);
    if (current_ != epoch_ || step != step_) return;
    (interrupt_ ? trainer.interrupt_training : trainer.stop_training) = true;
  }
  std::vector<std::string> positions;  // what a checkpoint taken after each step records

 private:
  int epoch_, current_ = 0;
  int64_t step_;
  bool interrupt_;
};

struct FitRun {
  History history;
  std::vector<Logs> step_logs;
  std::vector<std::vector<float>> weights;
  int64_t iterations = 0;
  std::vector<std::string> events, positions;
};

// The same seeded model each time: weights from seeded initializers, dropout from the runtime's seed.
// The loss scale (mixed precision's, harmless in f32) is what the host updates as it reads a step.
Trainer make_trainer() {
  configure_runtime({.threads = 1, .seed = 7});
  nn::Sequential model({nn::InputLayer({8}),
                        nn::Dense(16, {.activation = "relu", .kernel_initializer = {"glorot_uniform", 1}}),
                        nn::Dropout(0.25), nn::Dense(3, {.kernel_initializer = {"glorot_uniform", 2}})});
  return compile(model, {.optimizer = Adam({.learning_rate = 0.01}),
                         .loss = SparseCategoricalCrossentropy({.from_logits = true}),
                         .metrics = {"accuracy"},
                         .loss_scale = LossScaleOptions{},
                         .strategy = distribute::OneDevice(Device::cpu(1))});
}

// `samples` rows; x's first feature is the sample's index (how the log names a batch), y in [0, 3).
std::pair<Tensor, Tensor> samples(int64_t count) {
  Generator generator(3);
  Tensor x = random_normal({count, 8}, 0, 1, DType::kF32, Device::cpu(), &generator);
  for (int64_t i = 0; i < count; ++i) x.data<float>()[i * 8] = float(i);
  const Tensor y = cast(random_uniform({count}, 0, 3, DType::kF64, Device::cpu(), &generator), DType::kU8);
  return {x, y};
}

template <typename Fit>
FitRun fit_run(FitOptions options, bool look_ahead, const Fit& fit, std::shared_ptr<StopAt> stop = nullptr) {
  Trainer trainer = make_trainer();
  EventLog log{.trainer = &trainer, .batch_size = options.batch_size};
  auto ends = std::make_shared<RecordBatchEnds>();
  options.callbacks = {ends};
  if (stop) options.callbacks.push_back(stop);
  options.verbose = 0;
  options.prefetch_to_device = look_ahead;
  FitRun result;
  {
    const Recording scope(log);
    result.history = fit(trainer, options);
  }
  result.step_logs = ends->logs;
  for (const Variable& w : trainer.model().weights()) {
    EXPECT_EQ(w.value().device(), Device::cpu(1));
    result.weights.push_back(w.value().to(Device::cpu()).to_vector<float>());
  }
  result.iterations = trainer.optimizer().iterations().value().to(Device::cpu()).item<int64_t>();
  result.events = log.events;
  if (stop) result.positions = stop->positions;
  return result;
}

void expect_same_results(const FitRun& ahead, const FitRun& plain) {
  ASSERT_FALSE(plain.step_logs.empty());
  EXPECT_EQ(ahead.step_logs, plain.step_logs);
  EXPECT_EQ(ahead.history.history, plain.history.history);
  EXPECT_EQ(ahead.history.epochs, plain.history.epochs);
  EXPECT_EQ(ahead.history.steps, plain.history.steps);
  EXPECT_EQ(ahead.history.interrupted, plain.history.interrupted);
  EXPECT_EQ(ahead.iterations, plain.iterations);
  EXPECT_EQ(ahead.weights, plain.weights);
  EXPECT_EQ(ahead.positions, plain.positions);
  // The run trained: the loss moved (a comparison of two runs that did nothing would pass too).
  EXPECT_NE(plain.step_logs.front().at("loss"), plain.step_logs.back().at("loss"));
}

class FitLookAhead : public ::testing::Test {
 protected:
  void SetUp() override {
    set_logical_cpu_devices({{.threads = 1}, {.threads = 1}});
    // Stays registered for the process (there is no unregister): outside a recording it copies as the default.
    register_batch_upload(DeviceType::kCPU,
                          [](int index) { return std::make_unique<RecordingUpload>(Device::cpu(index)); });
  }
  void TearDown() override {
    set_logical_cpu_devices({});
    configure_runtime({});
  }
};

auto fit_tensors(const Tensor& x, const Tensor& y) {
  return [x, y](Trainer& trainer, const FitOptions& options) { return trainer.fit(x, y, options); };
}

TEST_F(FitLookAhead, UploadsBatchNPlus1BeforeReadingStepN) {
  const auto [x, y] = samples(12);
  const FitOptions options{.epochs = 2, .batch_size = 4, .shuffle = false};
  const FitRun ahead = fit_run(options, true, fit_tensors(x, y));
  // Batch N+1 goes up when step N has been launched (N+1 launched) and its outputs not read (N
  // read); the callbacks of step N still come before step N+1. No look-ahead over the epoch's end.
  const std::vector<std::string> expected_ahead = {"upload 0: 0 launched, 0 read",
                                                   "upload 1: 1 launched, 0 read",
                                                   "end 1.0",
                                                   "upload 2: 2 launched, 1 read",
                                                   "end 1.1",
                                                   "end 1.2",  // the epoch's last step: nothing fetched ahead
                                                   "upload 0: 3 launched, 3 read",
                                                   "upload 1: 4 launched, 3 read",
                                                   "end 2.0",
                                                   "upload 2: 5 launched, 4 read",
                                                   "end 2.1",
                                                   "end 2.2"};
  EXPECT_EQ(ahead.events, expected_ahead);
  const FitRun plain = fit_run(options, false, fit_tensors(x, y));
  const std::vector<std::string> expected_plain = {
      "upload 0: 0 launched, 0 read", "end 1.0", "upload 1: 1 launched, 1 read", "end 1.1",
      "upload 2: 2 launched, 2 read", "end 1.2", "upload 0: 3 launched, 3 read", "end 2.0",
      "upload 1: 4 launched, 4 read", "end 2.1", "upload 2: 5 launched, 5 read", "end 2.2"};
  EXPECT_EQ(plain.events, expected_plain);
  expect_same_results(ahead, plain);
}

TEST_F(FitLookAhead, AcrossEpochEndsTheResultsAreBitForBitThoseWithout) {
  // Shuffled, a smaller last batch, two micro-batches a step, validation between epochs.
  const auto [x, y] = samples(44);
  const auto [x_val, y_val] = samples(20);
  const FitOptions options{
      .epochs = 3, .batch_size = 8, .validation_data = {{x_val, y_val}}, .gradient_accumulation = 2};
  const FitRun ahead = fit_run(options, true, fit_tensors(x, y));
  const FitRun plain = fit_run(options, false, fit_tensors(x, y));
  EXPECT_EQ(plain.step_logs.size(), 18u);  // 6 batches a epoch, the last of 4
  ASSERT_EQ(ahead.history.history.count("val_loss"), 1u);
  expect_same_results(ahead, plain);
}

TEST_F(FitLookAhead, AStopMidEpochActsAtTheSameStep) {
  const auto [x, y] = samples(40);
  const FitOptions options{.epochs = 3, .batch_size = 8};
  const FitRun ahead = fit_run(options, true, fit_tensors(x, y), std::make_shared<StopAt>(2, 2, false));
  const FitRun plain = fit_run(options, false, fit_tensors(x, y), std::make_shared<StopAt>(2, 2, false));
  EXPECT_EQ(plain.iterations, 8);  // 5 steps of epoch 1, 3 of epoch 2
  EXPECT_EQ(plain.history.epochs, std::vector<int>({1, 2}));
  expect_same_results(ahead, plain);
  // The batch after the stop was uploaded but no step took it.
  EXPECT_EQ(ahead.events.size(), plain.events.size() + 1);
}

TEST_F(FitLookAhead, StepsPerEpochShorterThanTheDataFetchesNothingPastIt) {
  const auto [x, y] = samples(40);
  const FitOptions options{.epochs = 2, .batch_size = 8, .shuffle = false, .steps_per_epoch = 2};
  const FitRun ahead = fit_run(options, true, fit_tensors(x, y));
  const FitRun plain = fit_run(options, false, fit_tensors(x, y));
  const std::vector<std::string> expected_ahead = {
      "upload 0: 0 launched, 0 read", "upload 1: 1 launched, 0 read", "end 1.0", "end 1.1",
      "upload 0: 2 launched, 2 read", "upload 1: 3 launched, 2 read", "end 2.0", "end 2.1"};
  EXPECT_EQ(ahead.events, expected_ahead);
  expect_same_results(ahead, plain);
}

auto fit_dataset(const data::Dataset& dataset) {
  return [dataset](Trainer& trainer, const FitOptions& options) { return trainer.fit(dataset, options); };
}

TEST_F(FitLookAhead, AnInterruptRecordsThePositionOfTheLastStepTaken) {
  // A checkpoint after step N records the iterator's position after batch N, not after the batch
  // fetched ahead; an interrupt (preemption) leaves that position for the resume.
  const auto [x, y] = samples(40);
  const data::Dataset dataset = data::Dataset::from_tensor_slices({x, y}).batch(8);
  const FitOptions options{.epochs = 2};
  const FitRun ahead = fit_run(options, true, fit_dataset(dataset), std::make_shared<StopAt>(1, 2, true));
  const FitRun plain = fit_run(options, false, fit_dataset(dataset), std::make_shared<StopAt>(1, 2, true));
  EXPECT_TRUE(plain.history.interrupted);
  ASSERT_EQ(plain.positions.size(), 3u);
  EXPECT_NE(plain.positions[0], plain.positions[1]);
  expect_same_results(ahead, plain);
}

TEST_F(FitLookAhead, AnInputErrorComesAfterThePreviousStepsCallbacks) {
  // The pipeline fails on batch 2, which the look-ahead fetches during step 1: the error must still
  // come after step 1's callbacks (a checkpoint of step 1, say), as it does without the look-ahead.
  const auto [x, y] = samples(40);
  const data::Dataset dataset = data::Dataset::from_tensor_slices({x, y}).batch(8).map([](const data::Element& batch) {
    if (batch[0].to_vector<float>()[0] == 16) throw DataError("batch 2 is corrupt");
    return batch;
  });
  for (const bool look_ahead : {true, false}) {
    Trainer trainer = make_trainer();
    EventLog log{.trainer = &trainer, .batch_size = 8};
    const Recording scope(log);
    FitOptions options{.verbose = 0, .callbacks = {std::make_shared<RecordBatchEnds>()}};
    options.prefetch_to_device = look_ahead;
    try {
      trainer.fit(dataset, options);
      ADD_FAILURE() << "the pipeline's error was lost";
    } catch (const DataError& error) {
      EXPECT_NE(std::string(error.what()).find("batch 2 is corrupt"), std::string::npos) << error.what();
    }
    const std::vector<std::string> expected =
        look_ahead ? std::vector<std::string>{"upload 0: 0 launched, 0 read", "upload 1: 1 launched, 0 read", "end 1.0",
                                              "end 1.1"}
                   : std::vector<std::string>{"upload 0: 0 launched, 0 read", "end 1.0", "upload 1: 1 launched, 1 read",
                                              "end 1.1"};
    EXPECT_EQ(log.events, expected) << "look-ahead " << look_ahead;
  }
}

}  // namespace
}  // namespace nimbus::train
