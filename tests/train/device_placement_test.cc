// The trainer on a device other than cpu:0, checked here without a GPU: with
// the CPU split into two logical devices, `runtime.device: cpu:1` puts the
// model's weights, Adam's step counter, rate and slots and every batch on
// cpu:1, where any tensor left on cpu:0 would stop an op with "input 0 is on
// cpu:1 but input 1 is on cpu:0". The same code path serves CUDA
// (tests/gpu_train); here the kernels are the CPU's, so the run must match
// one on cpu:0 exactly.
#include <gtest/gtest.h>

#include "nimbus/device/logical_devices.h"
#include "nimbus/train/config.h"
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

TEST_F(TrainerOnAnotherDevice, ACheckpointRestoredBeforeFitTrainsOnCpu1) {
  // restore_checkpoint builds the optimizer on the host before fit places anything: its counter, rate
  // and slots must follow the weights to cpu:1, and the host tensors of the file be copied there.
  const std::string path = ::testing::TempDir() + "/device_placement_checkpoint.safetensors";
  const nlohmann::json config = load_config("examples/fashion_mnist_mlp.yaml", {"runtime.device=cpu:1"});
  configure_runtime_from_config(config);
  const Tensor x = random_uniform({64, 28, 28, 1}, 0, 1);
  const Tensor y = cast(random_uniform({64}, 0, 10, DType::kF64), DType::kU8);
  FitOptions options;
  options.verbose = 0;
  {
    Trainer first = compile_from_config(model_from_train_config(config), config);
    first.fit(x, y, options);
    first.save_checkpoint(path);
  }
  Trainer second = compile_from_config(model_from_train_config(config), config);
  second.restore_checkpoint(path);
  second.fit(x, y, options);
  for (const Variable& v : second.optimizer().variables()) EXPECT_EQ(v.value().device(), Device::cpu(1)) << v.name();
  EXPECT_EQ(second.optimizer().iterations().value().item<int64_t>(), 4);  // 2 steps before the save, 2 after
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
