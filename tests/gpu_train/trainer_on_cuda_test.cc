// `nimbus train examples/fashion_mnist_mlp.yaml --set runtime.device=cuda` as
// an API run: the config's MLP trained a few steps on the GPU and on the CPU
// from the same seed and batches. On the GPU the weights, Adam's step counter,
// rate and slots stay there and batches arrive through the CUDA batch uploader.
// Tolerances as tests/gpu/training_step_test.cc: the first loss (forward only)
// to the harness's f32 1e-5; later losses to 1e-4 and the weights to 1e-3 in
// relative L2 norm, since Adam's first steps move each weight by about the
// learning rate whatever its gradient's size (a gradient near zero may change
// sign between cuBLASLt's and the CPU's summation orders).
// Built only in the full build (the GPU-only build has no nn / train layers).
#include <gtest/gtest.h>

#include <cmath>

#include "nimbus/device/backend.h"
#include "support/config_training.h"
#include "support/tensor_compare.h"

namespace nimbus {
namespace {

TEST(CudaTrainer, TheMlpConfigTrainsOnTheGpuAsOnTheCpu) {
  // Training on CUDA needs a GPU; the `gpu` label runs this where one is lent.
  if (!has_backend(DeviceType::kCUDA)) GTEST_SKIP() << "no CUDA device: the trainer's steps run CUDA kernels";
  const testing::ConfigRun cpu = testing::train_mlp_config_on("cpu", 4, 64);
  const testing::ConfigRun gpu = testing::train_mlp_config_on("cuda", 4, 64);
  for (const Device device : gpu.weight_devices) EXPECT_EQ(device.type, DeviceType::kCUDA) << device.to_string();
  ASSERT_GE(gpu.optimizer_devices.size(), 3u);
  for (const Device device : gpu.optimizer_devices) EXPECT_EQ(device.type, DeviceType::kCUDA) << device.to_string();
  ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
  ASSERT_EQ(gpu.losses.size(), 4u);
  EXPECT_NEAR(gpu.losses[0], cpu.losses[0], 1e-5 * std::abs(cpu.losses[0]));
  for (size_t t = 1; t < cpu.losses.size(); ++t) EXPECT_NEAR(gpu.losses[t], cpu.losses[t], 1e-4) << "step " << t;
  ASSERT_EQ(gpu.weights.size(), cpu.weights.size());
  for (size_t i = 0; i < cpu.weights.size(); ++i) {
    EXPECT_LT(testing::relative_error(gpu.weights[i], cpu.weights[i]), 1e-3) << "weight " << i;
  }
}

}  // namespace
}  // namespace nimbus
