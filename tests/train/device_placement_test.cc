// The trainer on a device other than cpu:0, checked here without a GPU: with
// the CPU split into two logical devices, `runtime.device: cpu:1` puts the
// model's weights, Adam's step counter, rate and slots and every batch on
// cpu:1, where any tensor left on cpu:0 would stop an op with "input 0 is on
// cpu:1 but input 1 is on cpu:0". The same code path serves CUDA
// (tests/gpu_train); here the kernels are the CPU's, so the run must match
// one on cpu:0 exactly.
#include <gtest/gtest.h>

#include "nimbus/device/logical_devices.h"
#include "support/config_training.h"

namespace nimbus::train {
namespace {

class TrainerOnAnotherDevice : public ::testing::Test {
 protected:
  void SetUp() override { set_logical_cpu_devices({{.threads = 1}, {.threads = 1}}); }
  void TearDown() override {
    set_logical_cpu_devices({});
    configure_runtime({});
  }
};

TEST_F(TrainerOnAnotherDevice, TheMlpConfigTrainsOnCpu1AsOnCpu0) {
  const testing::ConfigRun reference = testing::train_mlp_config_on("cpu:0", 3);
  const testing::ConfigRun placed = testing::train_mlp_config_on("cpu:1", 3);
  for (const Device device : placed.weight_devices) EXPECT_EQ(device, Device::cpu(1));
  ASSERT_GE(placed.optimizer_devices.size(), 3u);  // the step counter, the rate, the slots
  for (const Device device : placed.optimizer_devices) EXPECT_EQ(device, Device::cpu(1));
  for (const Device device : reference.weight_devices) EXPECT_EQ(device, Device::cpu(0));
  ASSERT_EQ(placed.losses.size(), 3u);
  EXPECT_EQ(placed.losses, reference.losses);
  ASSERT_EQ(placed.weights.size(), reference.weights.size());
  for (size_t i = 0; i < placed.weights.size(); ++i) {
    EXPECT_EQ(placed.weights[i].to_vector<float>(), reference.weights[i].to_vector<float>()) << "weight " << i;
  }
}

TEST_F(TrainerOnAnotherDevice, ADeviceThatDoesNotExistIsANamedError) {
  set_logical_cpu_devices({});
  try {
    testing::train_mlp_config_on("cpu:1", 1);
    FAIL() << "training on a missing cpu:1 succeeded";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("cpu:1"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace nimbus::train
