// The GPU collectives on a GPU (label gpu; each case skips here, saying why): a
// one-rank NCCL communicator made as a multi-worker job makes it (rank 0's unique
// id broadcast over the host collectives) all-reduces through the stream-ordered
// buckets; a one-replica mirrored step over cuda:0 goes through the strategy's NCCL
// path; and with two or more GPUs, two replicas train to one GPU's weights.
#include <gtest/gtest.h>

#include "nimbus/autodiff/gradient_tape.h"
#include "nimbus/device/backend.h"
#include "nimbus/device/nccl.h"
#include "nimbus/distribute/all_reduce.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/nn/layers.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/train/trainer.h"
#include "src/distribute/device_collectives.h"
#include "src/distribute/stream_ordered_buckets.h"
#include "train/train_test_util.h"

namespace nimbus::testing {
namespace {

// Why the case cannot run here, or empty.
std::string missing_for_nccl(int gpus) {
  if (!has_backend(DeviceType::kCUDA)) return "no CUDA device: NCCL's collectives run on GPUs";
  if (backend(DeviceType::kCUDA).device_count() < gpus) {
    return std::to_string(gpus) + " GPUs needed, " + std::to_string(backend(DeviceType::kCUDA).device_count()) +
           " present";
  }
  const NcclStatus nccl = nccl_status();
  return nccl.loaded ? std::string() : nccl.to_string();
}

#define NIMBUS_SKIP_WITHOUT_NCCL(gpus)                                \
  if (const std::string why = missing_for_nccl(gpus); !why.empty()) { \
    GTEST_SKIP() << why;                                              \
  }

TEST(NcclGpu, OneRankAllReducesThroughTheStreamOrderedBuckets) {
  NIMBUS_SKIP_WITHOUT_NCCL(1);
  distribute::InProcessGroup host(1);
  const std::unique_ptr<distribute::DeviceCollectives> nccl =
      distribute::nccl_world_member(host.member(0), Device::cuda(0), {.timeout = std::chrono::seconds(60)});
  distribute::StreamOrderedBuckets buckets(*nccl);
  Stream& compute = backend(DeviceType::kCUDA).default_stream(0);
  const std::vector<Tensor> bucket = {random_normal({1000}).to(Device::cuda(0)),
                                      random_normal({7, 3}).to(Device::cuda(0))};
  buckets.start(bucket, compute);
  std::vector<Tensor> sums = {Tensor::empty(Shape{1000}, DType::kF32, Device::cuda(0)),
                              Tensor::empty(Shape{7, 3}, DType::kF32, Device::cuda(0))};
  buckets.wait(bucket, sums, compute, "a test");
  // One rank's sum is its own buffer, bit for bit.
  for (size_t i = 0; i < bucket.size(); ++i) EXPECT_EQ(values_of(sums[i]), values_of(bucket[i])) << "tensor " << i;
}

TEST(MirroredGpu, OneReplicaStepAllReducesItsGradientsThroughNccl) {
  NIMBUS_SKIP_WITHOUT_NCCL(1);
  const Device gpu = Device::cuda(0);
  std::vector<Variable> w;
  for (const char* name : {"w0", "w1", "w2"}) w.emplace_back(random_normal({16, 16}, 0, 0.3).to(gpu), name);
  const Tensor x = random_normal({8, 16}).to(gpu);
  auto loss_of = [&] { return mean(matmul(relu(matmul(relu(matmul(x, w[0].value())), w[1].value())), w[2].value())); };
  GradientTape plain;
  const std::vector<Tensor> expected = plain.gradient(loss_of(), w);
  std::vector<Tensor> reduced;
  auto strategy = distribute::Mirrored({gpu});
  strategy->run([&](int) {
    std::vector<Tensor> values;
    for (const Variable& v : w) values.push_back(v.value());
    distribute::OverlappedAllReduce reduce(values, 1024);  // one bucket per weight
    GradientTape tape;
    const Tensor loss = loss_of();
    tape.on_gradient_ready([&](size_t i, const Tensor& g) { reduce.ready(i, g); });
    (void)tape.gradient(loss, w);
    reduced = reduce.finish();
  });
  ASSERT_EQ(reduced.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(reduced[i].device(), gpu);
    EXPECT_EQ(values_of(reduced[i]), values_of(expected[i])) << "w" << i;
  }
}

TEST(MirroredGpu, TwoReplicasTrainToTheWeightsOfOneGpu) {
  NIMBUS_SKIP_WITHOUT_NCCL(2);
  const Tensor x = random_normal({256, 12});
  const Tensor y = random_uniform({256}, 0, 5).to(DType::kI64);
  auto train_on = [&](std::shared_ptr<distribute::Strategy> strategy) {
    manual_seed(11);
    nn::Model model = nn::Sequential({nn::InputLayer({12}), nn::Dense(32, {.activation = "relu"}), nn::Dense(5)});
    train::Trainer trainer = train::compile(model, {.optimizer = train::SGD({.learning_rate = 0.05, .momentum = 0.9}),
                                                    .loss = train::SparseCategoricalCrossentropy({.from_logits = true}),
                                                    .strategy = std::move(strategy)});
    (void)trainer.fit(x, y, {.epochs = 1, .batch_size = 32, .seed = 3, .verbose = 0});
    return flat_weights(trainer.model());
  };
  const std::vector<double> one = train_on(distribute::OneDevice(Device::cuda(0)));
  const std::vector<double> two = train_on(distribute::Mirrored({Device::cuda(0), Device::cuda(1)}));
  // Each GPU sums its half of the batch in its own order (cuBLASLt): as close as the CPU / GPU comparison.
  EXPECT_LE(relative_norm_error(two, one), 1e-4);
}

}  // namespace
}  // namespace nimbus::testing
