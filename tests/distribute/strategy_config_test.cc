// runtime.strategy in configs: the strategy it names, its defaults, and clear errors.
#include <gtest/gtest.h>

#include <cstdlib>

#include "nimbus/device/backend.h"
#include "nimbus/device/logical_devices.h"
#include "nimbus/distribute/multi_worker.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/train/config.h"
#include "train/train_test_util.h"

namespace nimbus::testing {
namespace {

class StrategyConfig : public ::testing::Test {
 protected:
  void TearDown() override { set_logical_cpu_devices({}); }
};

const char* kModel =
    "model: {input_shape: [4], layers: [{Dense: {units: 2}}]}\n"
    "compile: {optimizer: sgd, loss: {name: sparse_categorical_crossentropy, from_logits: true}}\n"
    "data: {train: {images: images.idx, labels: labels.idx}}\n";

TEST_F(StrategyConfig, MirroredSplitsTheCpuIntoTheListedDevices) {
  const nlohmann::json config = train::parse_config(
      std::string(kModel) + "runtime: {threads: 4, strategy: {type: mirrored, devices: [cpu:0, cpu:1]}}\n", "c.yaml");
  EXPECT_EQ(config["runtime"]["strategy"]["collective_timeout"], 600);
  EXPECT_EQ(config["runtime"]["strategy"]["bucket_size"], "25MiB");
  EXPECT_EQ(config["runtime"]["strategy"]["overlap"], true);
  const auto strategy = distribute::strategy_from_config(config["runtime"]["strategy"], 4, "c.yaml");
  EXPECT_EQ(strategy->name(), "mirrored");
  EXPECT_EQ(strategy->num_replicas_in_sync(), 2);
  EXPECT_EQ(logical_cpu_device_count(), 2);
  EXPECT_EQ(logical_cpu_device_threads(1), 2) << "runtime.threads shared evenly";
}

TEST_F(StrategyConfig, WithoutASectionTrainingRunsOnOneDevice) {
  const nlohmann::json config = train::parse_config(std::string(kModel), "c.yaml");
  EXPECT_EQ(
      distribute::strategy_from_config(config["runtime"].value("strategy", nlohmann::json()), 0, "c.yaml")->name(),
      "one_device");
}

TEST_F(StrategyConfig, BadValuesAreNamed) {
  const std::string type = error_message([] {
    (void)distribute::strategy_from_config({{"type", "parameter_server"}}, 0, "c.yaml");
  });
  EXPECT_NE(type.find("c.yaml: runtime.strategy.type is 'parameter_server'"), std::string::npos) << type;
  EXPECT_NE(type.find("one_device, mirrored or multi_worker_mirrored"), std::string::npos) << type;
  const std::string timeout = error_message([] {
    (void)distribute::strategy_from_config({{"type", "mirrored"}, {"collective_timeout", 0}}, 0, "c.yaml");
  });
  EXPECT_NE(timeout.find("collective_timeout is 0 seconds"), std::string::npos) << timeout;
  const std::string overlap = error_message([] {
    (void)distribute::strategy_from_config({{"type", "mirrored"}, {"overlap", "yes"}}, 0, "c.yaml");
  });
  EXPECT_NE(overlap.find("c.yaml: runtime.strategy.overlap is \"yes\""), std::string::npos) << overlap;
  const std::string key = error_message(
      [] { (void)train::parse_config(std::string(kModel) + "runtime: {strategy: {typ: mirrored}}\n", "c.yaml"); });
  EXPECT_NE(key.find("runtime.strategy.typ"), std::string::npos) << key;
}

TEST_F(StrategyConfig, MirroredOnAGpuTrainingDeviceReplicatesOverGpusOnly) {
  // With runtime.device cuda, mirrored's replicas are GPUs (NCCL): here, without one, that is refused
  // rather than quietly replicating over CPU devices.
  if (has_backend(DeviceType::kCUDA)) GTEST_SKIP() << "a GPU is present: tests/gpu_distribute covers it";
  EXPECT_THROW((void)distribute::strategy_from_config({{"type", "mirrored"}}, 0, "c.yaml", Device::cuda()),
               Unavailable);
  const std::string mixed = error_message([] {
    set_logical_cpu_devices({{}, {}});
    (void)distribute::Mirrored({Device::cpu(0), Device::cuda(0)});
  });
  EXPECT_NE(mixed.find("every replica must be on the same kind of device"), std::string::npos) << mixed;
}

// multi_worker_mirrored on GPUs: each process takes the GPU of its rank on the node.
TEST(LocalGpuIndex, IsMpirunsLocalRankElseTheLaunchersElseZero) {
  const auto restore = [](const char* name, const char* value) {
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  };
  const char* ompi = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const std::string ompi_saved = ompi != nullptr ? ompi : "";
  const char* local = std::getenv("LOCAL_RANK");
  const std::string local_saved = local != nullptr ? local : "";
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  unsetenv("LOCAL_RANK");
  EXPECT_EQ(distribute::local_gpu_index(), 0);
  setenv("LOCAL_RANK", "3", 1);
  EXPECT_EQ(distribute::local_gpu_index(), 3);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);
  EXPECT_EQ(distribute::local_gpu_index(), 2) << "mpirun's own variable first";
  restore("OMPI_COMM_WORLD_LOCAL_RANK", ompi != nullptr ? ompi_saved.c_str() : nullptr);
  restore("LOCAL_RANK", local != nullptr ? local_saved.c_str() : nullptr);
}

}  // namespace
}  // namespace nimbus::testing
