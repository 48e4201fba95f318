// choose_device: what `auto` picks, and why, on machines described by a probe (no CUDA backend, no
// driver, one GPU, several GPUs), and how a named device the machine lacks is refused.
#include "nimbus/device/device_choice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "nimbus/base/error.h"
#include "nimbus/device/backend.h"

namespace nimbus {
namespace {

using ::testing::HasSubstr;

const GpuProbe kNoCudaBuild{};
const GpuProbe kNoDriver{.cuda_backend = true,
                         .gpu_count = 0,
                         .unavailable_reason = "no NVIDIA driver: libcuda.so.1: cannot open shared object file"};
const GpuProbe kOneGpu{.cuda_backend = true, .gpu_count = 1};
const GpuProbe kFourGpus{.cuda_backend = true, .gpu_count = 4};

TEST(DeviceChoice, AutoTakesTheCpuInABuildWithoutCuda) {
  const DeviceChoice choice = choose_device("auto", "runtime.device", kNoCudaBuild);
  EXPECT_EQ(choice.device, Device::cpu());
  EXPECT_EQ(choice.reason, "auto: this build has no CUDA backend");
  EXPECT_EQ(choice.to_string(), "cpu:0 (auto: this build has no CUDA backend)");
}

TEST(DeviceChoice, AutoTakesTheCpuWithoutADriverAndSaysWhy) {
  const DeviceChoice choice = choose_device("auto", "runtime.device", kNoDriver);
  EXPECT_EQ(choice.device, Device::cpu());
  EXPECT_EQ(choice.reason, "auto: no NVIDIA driver: libcuda.so.1: cannot open shared object file");
}

TEST(DeviceChoice, AutoTakesTheCpuWhenTheDriverShowsNoGpu) {
  const DeviceChoice choice = choose_device("auto", "runtime.device", {.cuda_backend = true, .gpu_count = 0});
  EXPECT_EQ(choice.device, Device::cpu());
  EXPECT_EQ(choice.reason, "auto: the NVIDIA driver reports no GPU");
}

TEST(DeviceChoice, AutoTakesTheOneGpu) {
  const DeviceChoice choice = choose_device("auto", "runtime.device", kOneGpu);
  EXPECT_EQ(choice.device, Device::cuda(0));
  EXPECT_EQ(choice.reason, "auto: the one GPU present");
}

TEST(DeviceChoice, AutoTakesOneOfSeveralGpusAndSaysHowToUseAll) {
  const DeviceChoice choice = choose_device("auto", "runtime.device", kFourGpus);
  EXPECT_EQ(choice.device, Device::cuda(0));
  EXPECT_THAT(choice.reason, HasSubstr("4 GPUs present, one used"));
  EXPECT_THAT(choice.reason, HasSubstr("runtime.strategy.type mirrored trains on all of them (through NCCL)"));
}

TEST(DeviceChoice, NamedDevicesAreTakenAndSaySo) {
  EXPECT_EQ(choose_device("cpu", "--device", kNoCudaBuild).device, Device::cpu());
  EXPECT_EQ(choose_device("cpu", "--device", kNoCudaBuild).reason, "--device: cpu");
  EXPECT_EQ(choose_device("cuda", "runtime.device", kFourGpus).device, Device::cuda(0));
  const DeviceChoice third = choose_device("cuda:3", "runtime.device", kFourGpus);
  EXPECT_EQ(third.device, Device::cuda(3));
  EXPECT_EQ(third.to_string(), "cuda:3 (runtime.device: cuda:3)");
  EXPECT_EQ(choose_device("gpu:1", "runtime.device", kFourGpus).device, Device::cuda(1));
}

// Runs `what`, which must throw an Error of `Kind` whose message has `part`; returns the error's hint.
template <typename Kind, typename Call>
std::string hint_of_refusal(Call what, const std::string& part) {
  try {
    what();
    ADD_FAILURE() << "no error; expected one saying " << part;
  } catch (const Kind& e) {
    EXPECT_THAT(e.message(), HasSubstr(part));
    return e.hint();
  }
  return {};
}

TEST(DeviceChoice, AGpuTheBuildLacksIsUnavailableNamingTheSource) {
  const std::string hint = hint_of_refusal<Unavailable>([] { choose_device("cuda", "--device", kNoCudaBuild); },
                                                        "--device: cuda: this build has no CUDA backend");
  EXPECT_THAT(hint, HasSubstr("-DNIMBUS_CUDA=ON"));
}

TEST(DeviceChoice, AGpuWithoutADriverIsUnavailableSayingSo) {
  const std::string hint = hint_of_refusal<Unavailable>([] { choose_device("cuda:0", "runtime.device", kNoDriver); },
                                                        "runtime.device: cuda:0: no NVIDIA driver: libcuda.so.1");
  EXPECT_THAT(hint, HasSubstr("install the NVIDIA driver"));
}

TEST(DeviceChoice, AGpuIndexPastTheLastIsNotFound) {
  hint_of_refusal<NotFound>([] { choose_device("cuda:4", "--device", kFourGpus); },
                            "--device: cuda:4: no such GPU: this machine has 4 (cuda:0 to cuda:3)");
}

TEST(DeviceChoice, TextNamingNoDeviceIsAnInvalidArgumentNamingTheSource) {
  hint_of_refusal<InvalidArgument>([] { choose_device("tpu", "runtime.device", kOneGpu); },
                                   "runtime.device: unknown device 'tpu'");
  hint_of_refusal<InvalidArgument>([] { choose_device("cuda:x", "--device", kOneGpu); }, "--device: device 'cuda:x'");
}

TEST(DeviceChoice, TheProbeSeesThisBuildsBackend) {
  const GpuProbe probe = probe_gpus();
  EXPECT_EQ(probe.cuda_backend, find_backend(DeviceType::kCUDA) != nullptr);
  EXPECT_EQ(probe.gpu_count > 0, has_backend(DeviceType::kCUDA));
  // With no GPU the probe says why, and auto then takes the CPU.
  if (probe.gpu_count == 0) {
    EXPECT_FALSE(why_no_gpu(probe).empty());
    EXPECT_EQ(choose_device("auto", "runtime.device", probe).device, Device::cpu());
  }
}

}  // namespace
}  // namespace nimbus
