// MirroredStrategy over logical CPU devices: N replicas at a global batch of B
// train to the same weights as one device at B (the equivalence
// criterion, ||dw|| / ||w|| <= 1e-5 after 20 steps), for an MLP and a CNN.
#include <gtest/gtest.h>

#include "nimbus/base/rng.h"
#include "nimbus/device/logical_devices.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/nn/layers.h"
#include "nimbus/ops/creation.h"
#include "nimbus/train/trainer.h"
#include "train/train_test_util.h"

namespace nimbus::testing {
namespace {

constexpr int64_t kBatch = 32;
constexpr int64_t kSteps = 20;

enum class Kind { kMlp, kCnn };

// The same initial weights every time (the initializers draw from the default generator).
nn::Model fresh_model(Kind kind) {
  manual_seed(11);
  if (kind == Kind::kMlp) {
    return nn::Sequential({nn::InputLayer({12}), nn::Dense(32, {.activation = "relu"}), nn::Dense(5)});
  }
  return nn::Sequential({nn::InputLayer({8, 8, 1}), nn::Conv2D(4, {3, 3}, {.activation = "relu"}),
                         nn::MaxPooling2D({2, 2}), nn::Flatten(), nn::Dense(5)});
}

struct Data {
  Tensor x, y;
};

Data data_for(Kind kind) {
  const int64_t samples = kBatch * kSteps;
  Generator generator(5);
  Tensor x = kind == Kind::kMlp ? random_input({samples, 12}) : random_input({samples, 8, 8, 1});
  Tensor y = random_uniform({samples}, 0, 5, DType::kF32, Device::cpu(), &generator).to(DType::kI64);
  return {x, y};
}

struct Result {
  std::vector<double> weights;
  double loss = 0;
};

Result train(Kind kind, std::shared_ptr<distribute::Strategy> strategy, int64_t accumulation = 1,
             std::shared_ptr<train::Optimizer> optimizer = nullptr) {
  const Data data = data_for(kind);
  train::Trainer trainer = train::compile(
      fresh_model(kind), {.optimizer = optimizer ? optimizer : train::SGD({.learning_rate = 0.05, .momentum = 0.9}),
                          .loss = train::SparseCategoricalCrossentropy({.from_logits = true}),
                          .metrics = {"accuracy"},
                          .strategy = std::move(strategy)});
  const train::History history = trainer.fit(data.x, data.y,
                                             {.epochs = 1,
                                              .batch_size = kBatch,
                                              .seed = 3,
                                              .gradient_accumulation = accumulation,
                                              .steps_per_epoch = kSteps,
                                              .verbose = 0});
  return {flat_weights(trainer.model()), history.history.at("loss").back()};
}

std::shared_ptr<distribute::Strategy> mirrored(int replicas, distribute::StrategyOptions options = {}) {
  std::vector<LogicalCpuDevice> logical(static_cast<size_t>(replicas), {.threads = 1});
  set_logical_cpu_devices(logical);
  std::vector<Device> devices;
  for (int i = 0; i < replicas; ++i) devices.push_back(Device::cpu(i));
  return distribute::Mirrored(devices, options);
}

class Mirrored : public ::testing::TestWithParam<std::tuple<Kind, int>> {
 protected:
  void TearDown() override { set_logical_cpu_devices({}); }
};

TEST_P(Mirrored, ReplicasTrainToTheWeightsOfOneDevice) {
  const auto [kind, replicas] = GetParam();
  const Result one = train(kind, nullptr);
  const Result many = train(kind, mirrored(replicas));
  const Result start = train(kind, nullptr, 1, train::SGD({.learning_rate = 0}));
  ASSERT_GT(relative_norm_error(one.weights, start.weights), 1e-2) << "training must move the weights";
  EXPECT_LE(relative_norm_error(many.weights, one.weights), 1e-5);
  EXPECT_NEAR(many.loss, one.loss, 1e-5 * std::abs(one.loss)) << "the loss is averaged over the global batch";
}

INSTANTIATE_TEST_SUITE_P(Models, Mirrored,
                         ::testing::Combine(::testing::Values(Kind::kMlp, Kind::kCnn), ::testing::Values(2, 4)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == Kind::kMlp ? "Mlp" : "Cnn") + "_" +
                                  std::to_string(std::get<1>(info.param)) + "Replicas";
                         });

class MirroredTraining : public ::testing::Test {
 protected:
  void TearDown() override { set_logical_cpu_devices({}); }
};

TEST_F(MirroredTraining, AdamAndGradientAccumulationMatchOneDevice) {
  const Result one = train(Kind::kMlp, nullptr, 1, train::Adam({.learning_rate = 1e-2}));
  const Result many = train(Kind::kMlp, mirrored(2), 2, train::Adam({.learning_rate = 1e-2}));
  EXPECT_LE(relative_norm_error(many.weights, one.weights), 1e-5);
}

TEST_F(MirroredTraining, SmallGradientBucketsGiveTheSameBitsAsOneBucket) {
  // Buckets split the collective, not the per-element sums: the results are identical.
  const Result one_bucket = train(Kind::kCnn, mirrored(2));
  const Result small_buckets = train(Kind::kCnn, mirrored(2, {.bucket_bytes = 64}));
  EXPECT_EQ(small_buckets.weights, one_bucket.weights);
}

TEST_F(MirroredTraining, OverlappedBucketsGiveTheSameBitsAsTheAllReduceAfterBackward) {
  // The communication threads sum the same buckets in the same rank order, only earlier.
  const Result after = train(Kind::kCnn, mirrored(2, {.bucket_bytes = 64, .overlap = false}));
  const Result overlapped = train(Kind::kCnn, mirrored(2, {.bucket_bytes = 64, .overlap = true}));
  EXPECT_EQ(overlapped.weights, after.weights);
  // With gradient accumulation the buckets start in the last micro-batch only, with every micro-batch's sum.
  const Result accumulated_after =
      train(Kind::kMlp, mirrored(2, {.bucket_bytes = 64, .overlap = false}), 2, train::Adam({.learning_rate = 1e-2}));
  const Result accumulated =
      train(Kind::kMlp, mirrored(2, {.bucket_bytes = 64, .overlap = true}), 2, train::Adam({.learning_rate = 1e-2}));
  EXPECT_EQ(accumulated.weights, accumulated_after.weights);
}

TEST_F(MirroredTraining, TheGpuPathsStreamOrderedBucketsTrainToTheWeightsOfOneDevice) {
  // device_streams: the buckets go through the communication stream and the stream-ordered buckets the
  // GPUs use (NCCL there), here over the in-process collectives.
  auto strategy = mirrored(2, {.bucket_bytes = 64, .device_streams = true});
  strategy->run([](int) {
    EXPECT_NE(distribute::current_replica()->stream_buckets, nullptr);
    EXPECT_EQ(distribute::current_replica()->gradient_thread, nullptr);
  });
  const Result one = train(Kind::kCnn, nullptr);
  const Result streams = train(Kind::kCnn, strategy);
  EXPECT_LE(relative_norm_error(streams.weights, one.weights), 1e-5);
  // The same buckets summed in the same rank order as the communication threads: the same bits.
  const Result threads = train(Kind::kCnn, mirrored(2, {.bucket_bytes = 64}));
  EXPECT_EQ(streams.weights, threads.weights);
  const Result accumulated_one = train(Kind::kMlp, nullptr, 1, train::Adam({.learning_rate = 1e-2}));
  const Result accumulated =
      train(Kind::kMlp, mirrored(2, {.bucket_bytes = 64, .overlap = false, .device_streams = true}), 2,
            train::Adam({.learning_rate = 1e-2}));
  EXPECT_LE(relative_norm_error(accumulated.weights, accumulated_one.weights), 1e-5);
}

TEST_F(MirroredTraining, ABatchTheReplicasDoNotDivideNamesTheValidOnes) {
  const Data data = data_for(Kind::kMlp);
  train::Trainer trainer = train::compile(
      fresh_model(Kind::kMlp),
      {.optimizer = train::SGD(), .loss = train::SparseCategoricalCrossentropy(), .strategy = mirrored(4)});
  const std::string message = error_message([&] { trainer.fit(data.x, data.y, {.batch_size = 30, .verbose = 0}); });
  EXPECT_NE(message.find("batch_size 30 is not divisible by gradient_accumulation 1 x 4 replicas"), std::string::npos)
      << message;
  EXPECT_NE(message.find("use batch_size 28 or 32"), std::string::npos) << message;
}

TEST_F(MirroredTraining, DevicesThatDoNotExistAreNamed) {
  set_logical_cpu_devices({});
  const std::string message = error_message([] { distribute::Mirrored({Device::cpu(0), Device::cpu(1)}); });
  EXPECT_NE(message.find("device cpu:1 does not exist: the CPU has 1 logical device(s)"), std::string::npos) << message;
  set_logical_cpu_devices({{}, {}});
  EXPECT_NE(error_message([] {
              distribute::Mirrored({Device::cpu(1), Device::cpu(1)});
            }).find("listed twice"),
            std::string::npos);
}

TEST_F(MirroredTraining, AFailingReplicaFailsTheStepWithoutHangingTheOthers) {
  auto strategy = mirrored(2, {.collectives = {.timeout = std::chrono::seconds(60)}});
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_message([&] {
    strategy->run([](int local) {
      if (local == 1) throw DataError("replica 1 read a bad record");
      std::vector<float> buffer(4, 1.0f);
      distribute::current_replica()->collectives->all_reduce(buffer, distribute::ReduceOp::kSum);
    });
  });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
  EXPECT_NE(message.find("replica 1 read a bad record"), std::string::npos) << message;
  // The strategy recovers: the next run has a fresh group.
  std::vector<float> sums(2);
  strategy->run([&](int local) {
    std::vector<float> buffer(1, float(local + 1));
    distribute::current_replica()->collectives->all_reduce(buffer, distribute::ReduceOp::kSum);
    sums[static_cast<size_t>(local)] = buffer[0];
  });
  EXPECT_EQ(sums, (std::vector<float>{3, 3}));
}

}  // namespace
}  // namespace nimbus::testing
