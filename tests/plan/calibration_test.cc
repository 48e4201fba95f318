// nimbus bench's calibration: the profile round-trips through its JSON file, a damaged file says how to
// make a new one, and a real calibration on this machine measures every op of the probe's training step.
#include "nimbus/plan/calibration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "nimbus/base/error.h"

namespace nimbus::plan {
namespace {

using ::testing::HasSubstr;

TEST(Calibration, ProfileRoundTripsThroughItsFile) {
  CalibrationProfile profile{.threads = 2, .matmul_flops = 3e11, .bandwidth = 6e10, .launch_seconds = 2e-7};
  profile.op_rates["fused_elementwise"] = {.flops_per_second = 2e9, .overhead_seconds = 3e-5};
  profile.op_rates["max_pool2d_backward"] = {.flops_per_second = 1.5e9, .overhead_seconds = 1e-4};
  profile.op_rates["conv2d"] = {.flops_per_second = 1e10,
                                .overhead_seconds = 1e-5,
                                .beyond = {{.from_work = 1e6, .flops_per_second = 3e10, .overhead_seconds = 8e-5}}};
  profile.step_overhead_seconds = 7e-4;
  profile.measured_at = "2026-11-30T20:00:00Z";
  const std::string path = (std::filesystem::temp_directory_path() / "nimbus_profile_roundtrip.json").string();
  save_profile(profile, path);
  const CalibrationProfile loaded = load_profile(path);
  EXPECT_EQ(to_json(loaded), to_json(profile));
  EXPECT_DOUBLE_EQ(loaded.op_rates.at("max_pool2d_backward").overhead_seconds, 1e-4);
  ASSERT_EQ(loaded.op_rates.at("conv2d").beyond.size(), 1u);
  EXPECT_DOUBLE_EQ(loaded.op_rates.at("conv2d").beyond[0].from_work, 1e6);
  const DeviceModel device = device_model(loaded);
  EXPECT_DOUBLE_EQ(device.op_rates.at("fused_elementwise").flops_per_second, 2e9);
  EXPECT_DOUBLE_EQ(device.step_overhead_seconds, 7e-4);
}

TEST(Calibration, AnOpMeasuredAtThreeSizesUsesTheLineOfTheSizesAroundTheKernel) {
  // Lines through (1e5 flops, 2e-5 s), (1e6, 1e-4) and (1e7, 4e-4): each kernel falls on its segment.
  const OpRate rate{
      .flops_per_second = 9e5 / 8e-5,
      .overhead_seconds = 2e-5 - 1e5 * 8e-5 / 9e5,
      .beyond = {{.from_work = 1e6, .flops_per_second = 9e6 / 3e-4, .overhead_seconds = 1e-4 - 1e6 * 3e-4 / 9e6}}};
  const auto seconds = [&](double work) {
    const OpLine line = rate.line_at(work);
    return line.overhead_seconds + work / line.flops_per_second;
  };
  EXPECT_NEAR(seconds(1e5), 2e-5, 1e-12);
  EXPECT_NEAR(seconds(5.5e5), 6e-5, 1e-12);  // halfway along the first segment
  EXPECT_NEAR(seconds(1e6), 1e-4, 1e-12);
  EXPECT_NEAR(seconds(5.5e6), 2.5e-4, 1e-12);  // halfway along the second
  EXPECT_NEAR(seconds(1e7), 4e-4, 1e-12);
  EXPECT_NEAR(seconds(1.9e7), 7e-4, 1e-12);  // the last line carries on beyond the largest size
}

TEST(Calibration, AProfileWithoutOpRatesAsksForANewBench) {
  CalibrationProfile profile{.threads = 2, .matmul_flops = 3e11};
  nlohmann::json old = to_json(profile);
  old.erase("op_rates");  // a profile from before the probe
  const std::string path = (std::filesystem::temp_directory_path() / "nimbus_profile_old.json").string();
  std::ofstream(path) << old.dump();
  try {
    load_profile(path);
    FAIL() << "an incomplete profile was accepted";
  } catch (const DataError& error) {
    EXPECT_THAT(error.what(), HasSubstr(path));
    EXPECT_THAT(error.what(), HasSubstr("op_rates"));
    EXPECT_THAT(error.hint(), HasSubstr("nimbus bench"));
  }
}

TEST(Calibration, MeasuresEveryOpOfTheProbesTrainingStep) {
  const CalibrationProfile profile = calibrate_cpu();
  EXPECT_GT(profile.matmul_flops, 1e9);
  EXPECT_GT(profile.convolution_flops, 1e9);
  EXPECT_GT(profile.bandwidth, 1e9);
  EXPECT_GT(profile.vector_flops, 1e8);
  for (const char* op :
       {"fused_elementwise", "fused_matmul", "matmul_pair", "fused_conv2d", "conv2d_backward_filter",
        "conv2d_backward_input", "max_pool2d", "max_pool2d_relu_backward", "relu_bias_backward", "sum"}) {
    ASSERT_TRUE(profile.op_rates.contains(op)) << op;
    EXPECT_GT(profile.op_rates.at(op).flops_per_second, 0) << op;
    EXPECT_GE(profile.op_rates.at(op).overhead_seconds, 0) << op;
  }
  // Fused kernels also by their program's length (op_cost_key), each with its own cost.
  EXPECT_TRUE(std::ranges::any_of(profile.op_rates,
                                  [](const auto& entry) { return entry.first.starts_with("fused_elementwise["); }));
  EXPECT_GE(profile.step_overhead_seconds, 0);
  EXPECT_LT(profile.step_overhead_seconds, 0.1);
}

}  // namespace
}  // namespace nimbus::plan
