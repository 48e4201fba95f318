// Longer runs of the README's demo: training keeps improving past the first
// epoch, and a run is reproducible from its seed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "support/run_command.h"

namespace {

std::string demo(const std::string& arguments) {
  return nimbus::testing::run_command(std::string(NIMBUS_EXAMPLES_DIR) + "/fashion_mnist_eager " + arguments);
}

std::vector<double> epoch_accuracies(const std::string& output) {
  std::vector<double> accuracies;
  const std::regex line(R"(epoch \d+: test accuracy ([0-9.]+))");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it) {
    accuracies.push_back(std::stod((*it)[1]));
  }
  return accuracies;
}

TEST(LongTraining, FiveEpochsOfSgdReach86Point5PercentAndBeatTheFirstEpoch) {
  const std::string output = demo("--epochs 5 --json");
  const std::vector<double> accuracies = epoch_accuracies(output);
  ASSERT_EQ(accuracies.size(), 5u) << output;
  EXPECT_GE(accuracies.back(), 0.865) << output;
  EXPECT_GT(accuracies.back(), accuracies.front() + 0.01) << output;
}

TEST(LongTraining, TheSameSeedGivesTheSameLossesAndAccuracies) {
  // Everything but the timing lines must match digit for digit.
  const auto without_timing = [](const std::string& output) {
    return std::regex_replace(output, std::regex(R"(trained .*\n|"seconds": [0-9.]+)"), "");
  };
  const std::string first = demo("--epochs 2 --seed 7 --json");
  const std::string second = demo("--epochs 2 --seed 7 --json");
  ASSERT_EQ(epoch_accuracies(first).size(), 2u) << first;
  EXPECT_EQ(without_timing(first), without_timing(second));
  EXPECT_NE(without_timing(first), without_timing(demo("--epochs 2 --seed 8 --json")))
      << "a different seed should change the run";
}

}  // namespace
