// NVML on a GPU (label gpu; skips here, saying why): what `nimbus dmon -c 3` shows, taken
// three times while the GPU runs matmuls, for the GPU-only build, which has no nimbus CLI.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "nimbus/device/backend.h"
#include "nimbus/monitor/nvml_sampler.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/linalg.h"

namespace nimbus {
namespace {

TEST(NvmlGpu, ThreeSamplesWhileTheGpuWorksReadEveryDevice) {
  if (!has_backend(DeviceType::kCUDA)) GTEST_SKIP() << "no CUDA device: NVML reads a GPU's driver";
  monitor::NvmlSampler nvml;
  ASSERT_TRUE(nvml.available()) << nvml.unavailable_reason();
  EXPECT_EQ(nvml.device_count(), backend(DeviceType::kCUDA).device_count());
  EXPECT_FALSE(nvml.driver_version().empty());
  const Tensor a = random_normal({2048, 2048}).to(Device::cuda());
  for (int sample = 0; sample < 3; ++sample) {
    for (int i = 0; i < 20; ++i) (void)matmul(a, a);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::vector<monitor::DeviceReading> readings = nvml.sample();
    ASSERT_EQ(static_cast<int>(readings.size()), nvml.device_count());
    const monitor::DeviceReading& first = readings[0];
    EXPECT_FALSE(first.uuid.empty());
    EXPECT_FALSE(first.name.empty());
    EXPECT_GT(first.memory_used_bytes, 0) << "this process holds device memory";
    EXPECT_LE(first.memory_used_bytes, first.memory_total_bytes);
    if (!std::isnan(first.sm_util_percent)) {
      EXPECT_GE(first.sm_util_percent, 0);
      EXPECT_LE(first.sm_util_percent, 100);
    }
    if (!std::isnan(first.power_watts)) EXPECT_GT(first.power_watts, 0);
  }
}

}  // namespace
}  // namespace nimbus
