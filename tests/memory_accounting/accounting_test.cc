// The memory accounting against the allocator: the estimate of a traced train
// step (graph/memory_estimate.h) must be within 10% of the peak bytes in use
// that the allocator measures while the step runs, for the MLP and the CNN of
// examples/ at three batch sizes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "nimbus/device/backend.h"
#include "nimbus/device/memory.h"
#include "nimbus/ops/creation.h"
#include "nimbus/train/config.h"
#include "nimbus/train/memory_check.h"

namespace nimbus::testing {
namespace {

// The allocator's peak in use while one train step runs (after a first step has traced the graph and
// allocated its arena), less what was in use before the model existed: parameters, optimizer state,
// the arena, the batch, outputs and anything a kernel allocates on the side.
uint64_t measured_step_peak(const nlohmann::json& config, int64_t batch) {
  Allocator& allocator = allocator_for(Device::cpu());
  const uint64_t before = allocator.stats().bytes_in_use;
  train::Trainer trainer = train::compile_from_config(train::model_from_train_config(config), config);
  Generator generator(7);
  const Tensor x = random_uniform({batch, 28, 28, 1}, 0, 1, DType::kF32, Device::cpu(), &generator);
  std::vector<uint8_t> labels(static_cast<size_t>(batch));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<uint8_t>(i * 7 % 10);
  const Tensor y = Tensor::from_vector<uint8_t>(labels, {batch});
  trainer.train_on_batch(x, y);
  allocator.reset_peak();
  trainer.train_on_batch(x, y);
  return allocator.stats().peak_bytes_in_use - before;
}

class MemoryAccounting : public ::testing::TestWithParam<std::tuple<std::string, int64_t>> {};

TEST_P(MemoryAccounting, PredictedPeakIsWithinTenPercentOfTheMeasured) {
  const auto& [model, batch] = GetParam();
  configure_memory(Device::cpu(), {});
  const nlohmann::json config =
      train::load_config(fmt::format("examples/fashion_mnist_{}.yaml", model), {"runtime.device=cpu"});
  const train::StepAnalysis predicted = train::analyze_train_step(config, batch);
  const uint64_t measured = measured_step_peak(config, batch);
  const double error = (double(predicted.memory.total()) - double(measured)) / double(measured);
  RecordProperty("predicted_bytes", std::to_string(predicted.memory.total()));
  RecordProperty("measured_bytes", std::to_string(measured));
  std::cout << fmt::format("{} batch {}: predicted {} ({}), measured {}, error {:+.1f}%\n", model, batch,
                           predicted.memory.total(), predicted.memory.to_string(), measured, 100 * error);
  EXPECT_LE(std::abs(error), 0.10) << predicted.memory.to_string() << " vs measured " << measured << " bytes";
}

INSTANTIATE_TEST_SUITE_P(FashionMnist, MemoryAccounting,
                         ::testing::Combine(::testing::Values("mlp", "cnn"), ::testing::Values(32, 128, 512)),
                         [](const auto& info) {
                           return fmt::format("{}_batch{}", std::get<0>(info.param), std::get<1>(info.param));
                         });

}  // namespace
}  // namespace nimbus::testing
