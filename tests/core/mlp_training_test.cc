// Integration: the README's main job (an eager two-layer MLP trained with
// plain SGD on Fashion-MNIST) reaches at least 84% test accuracy in one epoch.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/run_command.h"

namespace {

TEST(MlpTraining, EagerSgdReaches84PercentInOneEpoch) {
  const std::string output =
      nimbus::testing::run_command(std::string(NIMBUS_EXAMPLES_DIR) + "/fashion_mnist_eager --epochs 1 --json");
  const size_t line = output.rfind("{\"test_accuracy\"");
  ASSERT_NE(line, std::string::npos) << "no JSON summary in the demo's output:\n" << output;
  const nlohmann::json summary = nlohmann::json::parse(output.substr(line));
  EXPECT_GE(summary["test_accuracy"].get<double>(), 0.84) << output;
  EXPECT_LT(summary["final_loss"].get<double>(), 0.5) << output;
}

}  // namespace
