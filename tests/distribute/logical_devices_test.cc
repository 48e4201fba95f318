// Logical CPU devices: the CPU split into devices with their own thread budgets.
#include "nimbus/device/logical_devices.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <thread>

#include "nimbus/device/backend.h"
#include "nimbus/device/runtime.h"
#include "train/train_test_util.h"

namespace nimbus::testing {
namespace {

class LogicalDevices : public ::testing::Test {
 protected:
  void TearDown() override { set_logical_cpu_devices({}); }
};

TEST_F(LogicalDevices, SplitTheCpuIntoDevicesWithTheirOwnThreadBudgets) {
  ASSERT_EQ(backend(DeviceType::kCPU).device_count(), 1);
  set_logical_cpu_devices({{.threads = 1}, {.threads = 3}});
  EXPECT_EQ(backend(DeviceType::kCPU).device_count(), 2);
  EXPECT_EQ(logical_cpu_device_threads(0), 1);
  EXPECT_EQ(logical_cpu_device_threads(1), 3);
  EXPECT_NE(backend(DeviceType::kCPU).describe(1).find("cpu:1: 3 compute threads"), std::string::npos)
      << backend(DeviceType::kCPU).describe(1);
  // Allocations on a logical device come from the one host allocator.
  EXPECT_EQ(&allocator_for(Device::cpu(1)), &allocator_for(Device::cpu(0)));
}

TEST_F(LogicalDevices, AScopeSetsOnlyItsOwnThreadsBudget) {
  set_logical_cpu_devices({{.threads = 1}, {.threads = 3}});
  const int outside = omp_get_max_threads();
  int inside_0 = 0, inside_1 = 0, other_thread = 0;
  std::thread replica_0([&] {
    LogicalDeviceScope scope(Device::cpu(0));
    inside_0 = omp_get_max_threads();
  });
  std::thread replica_1([&] {
    LogicalDeviceScope scope(Device::cpu(1));
    inside_1 = omp_get_max_threads();
  });
  replica_0.join();
  replica_1.join();
  {
    LogicalDeviceScope scope(Device::cpu(1));
    other_thread = omp_get_max_threads();
  }
  EXPECT_EQ(inside_0, 1);
  EXPECT_EQ(inside_1, 3);
  EXPECT_EQ(other_thread, 3);
  EXPECT_EQ(omp_get_max_threads(), outside) << "the scope restores the thread's budget";
}

TEST_F(LogicalDevices, ZeroThreadsMeansAnEvenShareOfTheCores) {
  set_logical_cpu_devices({{}, {}});
  EXPECT_EQ(logical_cpu_device_threads(0), std::max(1, hardware_cores() / 2));
}

TEST_F(LogicalDevices, BadConfigurationsAreClearErrors) {
  EXPECT_NE(error_message([] { set_logical_cpu_devices({{.threads = -1}}); }).find("cpu:0 has -1 threads"),
            std::string::npos);
  set_logical_cpu_devices({{.threads = 1}, {.threads = 1}});
  const std::string missing = error_message([] { LogicalDeviceScope scope(Device::cpu(2)); });
  EXPECT_NE(missing.find("no logical CPU device cpu:2: there are cpu:0 .. cpu:1"), std::string::npos) << missing;
}

TEST_F(LogicalDevices, HostValuesLandOnTheDeviceAskedFor) {
  set_logical_cpu_devices({{.threads = 1}, {.threads = 1}});
  const Tensor scalar = Tensor::scalar(2.5f, Device::cpu(1));
  EXPECT_EQ(scalar.device(), Device::cpu(1));
  EXPECT_EQ(scalar.item<float>(), 2.5f);
  const Tensor values = Tensor::from_vector<float>({1, 2, 3}, Shape{3}, Device::cpu(1));
  EXPECT_EQ(values.device(), Device::cpu(1));
  EXPECT_EQ(Tensor::scalar(1.0f).device(), Device::cpu(0));
}

}  // namespace
}  // namespace nimbus::testing
