// nimbus plan and nimbus k8s end to end: JSON on stdout only, errors that name what is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/run_command.h"

namespace nimbus {
namespace {

using ::testing::HasSubstr;

const std::string kNimbus = NIMBUS_CLI;
const std::string kModel = " --params 1e8 --flops-per-sample 6e11 --samples 1000000 --epochs 2 --batch 256";

TEST(PlanCli, JsonHasTheDocumentedFieldsBestFirst) {
  const std::string output = testing::run_command(kNimbus + " plan" + kModel + " --json 2>/dev/null");
  const nlohmann::json result = nlohmann::json::parse(output);  // nothing but JSON on stdout
  ASSERT_GT(result["plans"].size(), 3u);
  for (const char* key : {"instance", "cloud", "device", "device_count", "precision", "micro_batch",
                          "gradient_accumulation", "step_seconds", "samples_per_sec", "bottleneck", "wall_hours",
                          "cost_on_demand_usd", "cost_spot_usd", "needs", "needs_reason", "command"}) {
    EXPECT_TRUE(result["plans"][0].contains(key)) << key;
  }
  // Cheapest first among the plans the image runs, then among those that need what it lacks.
  for (size_t i = 1; i < result["plans"].size(); ++i) {
    const nlohmann::json &before = result["plans"][i - 1], &plan = result["plans"][i];
    EXPECT_LE(before["needs"].size(), plan["needs"].size());
    if (before["needs"].size() != plan["needs"].size()) continue;
    EXPECT_LE(before["cost_on_demand_usd"].get<double>(), plan["cost_on_demand_usd"].get<double>());
  }
  EXPECT_FALSE(result["worth"].empty());
}

TEST(PlanCli, TableShowsReasonsAndWorth) {
  const std::string output = testing::run_command(kNimbus + " plan" + kModel + " --top 5 2>&1");
  EXPECT_THAT(output, HasSubstr("instance"));
  EXPECT_THAT(output, HasSubstr("bottleneck"));
  EXPECT_THAT(output, HasSubstr("What each optimization is worth on plan 1"));
  EXPECT_THAT(output, HasSubstr("mixed precision"));
}

TEST(PlanCli, UnknownGpuAndMissedDeadlineSayWhatIsKnownAndWhatComesClosest) {
  const std::string unknown = testing::run_command(kNimbus + " plan" + kModel + " --gpus T4,A200 2>&1; echo rc=$?");
  EXPECT_THAT(unknown, HasSubstr("unknown GPU 'A200'; known: T4"));
  EXPECT_THAT(unknown, HasSubstr("rc=1"));
  const std::string late = testing::run_command(kNimbus + " plan" + kModel + " --deadline 1m --json 2>&1 >/dev/null");
  EXPECT_THAT(late, HasSubstr("no plan meets the deadline of 1 min; the closest"));
  const std::string bad = testing::run_command(kNimbus + " plan" + kModel + " --deadline soon 2>&1");
  EXPECT_THAT(bad, HasSubstr("--deadline 'soon' is not a duration"));
}

TEST(K8sCli, WritesTheChosenPlansManifests) {
  const std::string yaml = testing::run_command(kNimbus + " k8s" + kModel + " --gpus A10G --plan 1 --name demo");
  EXPECT_THAT(yaml, HasSubstr("kind: Job"));
  EXPECT_THAT(yaml, HasSubstr("nvidia.com/gpu.product: NVIDIA-A10G"));
  const std::string missing = testing::run_command(kNimbus + " k8s" + kModel + " --gpus A10G --plan 99 2>&1");
  EXPECT_THAT(missing, HasSubstr("there is no plan 99"));
}

}  // namespace
}  // namespace nimbus
