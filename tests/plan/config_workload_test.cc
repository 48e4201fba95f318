// The workload of a nimbus train config: the traced step's cost is linear in the micro-batch, so two
// traces predict a third; and nimbus plan prices the examples end to end.
#include "nimbus/plan/config_workload.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nimbus/train/config.h"
#include "nimbus/train/memory_check.h"
#include "tests/support/run_command.h"

namespace nimbus::plan {
namespace {

using ::testing::HasSubstr;

TEST(ConfigWorkload, TwoTracesPredictAThirdMicroBatch) {
  for (const char* example : {"examples/fashion_mnist_mlp.yaml", "examples/fashion_mnist_cnn.yaml"}) {
    const nlohmann::json config = train::load_config(example);
    const Workload work = workload_from_config(config, true);
    const train::StepAnalysis at_100 = train::analyze_train_step(config, 100);
    double flops = 0;
    double bytes = 0;
    for (const Kernel& kernel : work.kernels_at(100, Precision::kFloat32)) {
      flops += kernel.flops;
      bytes += kernel.bytes;
    }
    // Exact but for the few fills constant folding keeps as constants at small batches only (they run
    // as kernels at 100): a few hundred thousandths of the step.
    EXPECT_NEAR(flops / at_100.cost.flops, 1.0, 1e-3) << example;
    EXPECT_NEAR(bytes / static_cast<double>(at_100.cost.bytes_read + at_100.cost.bytes_written), 1.0, 1e-3) << example;
    EXPECT_NEAR(work.memory_bytes(100, Precision::kFloat32) / static_cast<double>(at_100.memory.total()), 1.0, 0.01)
        << example;
    EXPECT_EQ(work.gradient_bytes, static_cast<double>(at_100.memory.gradient_bytes)) << example;
    // The CNN's convolutions and the MLP's matmuls reach the matrix units.
    EXPECT_TRUE(std::ranges::any_of(work.kernels, [](const LinearKernel& k) { return on_matrix_units(k.unit); }));
  }
}

TEST(ConfigWorkload, ConvolutionsAreToldApartAndTheUpdateRunsOncePerStep) {
  const Workload cnn = workload_from_config(train::load_config("examples/fashion_mnist_cnn.yaml"), true);
  EXPECT_TRUE(std::ranges::any_of(cnn.kernels, [](const LinearKernel& k) { return k.unit == Unit::kConvolution; }));
  EXPECT_TRUE(std::ranges::any_of(cnn.kernels, [](const LinearKernel& k) { return k.per_step; }));
  EXPECT_EQ(training_samples(train::load_config("examples/fashion_mnist_cnn.yaml")), 60000);
}

TEST(PlanCli, PricesTheCnnExampleKeepingItsBatch) {
  const std::string output = nimbus::testing::run_command(
      std::string(NIMBUS_CLI) + " plan examples/fashion_mnist_cnn.yaml --gpus T4,A100-40GB --json 2>/dev/null");
  const nlohmann::json result = nlohmann::json::parse(output);
  ASSERT_FALSE(result["plans"].empty());
  for (const auto& plan : result["plans"]) {
    EXPECT_EQ(plan["micro_batch"].get<int64_t>() * plan["gradient_accumulation"].get<int64_t>() *
                  plan["device_count"].get<int64_t>(),
              128);
  }
  EXPECT_THAT(result["worth"].dump(), HasSubstr("JIT fusion"));
}

}  // namespace
}  // namespace nimbus::plan
