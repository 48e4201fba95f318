// Integration: the README's main job (an eager two-layer MLP trained with
// plain SGD on Fashion-MNIST) reaches at least 84% test accuracy in one epoch.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace {

std::string run(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return {};
  std::string output;
  std::array<char, 4096> buffer;
  while (fgets(buffer.data(), buffer.size(), pipe.get()) != nullptr) output += buffer.data();
  return output;
}

TEST(MlpTraining, EagerSgdReaches84PercentInOneEpoch) {
  const std::string output = run(std::string(NIMBUS_EXAMPLES_DIR) + "/fashion_mnist_eager --epochs 1 --json");
  const size_t line = output.rfind("{\"test_accuracy\"");
  ASSERT_NE(line, std::string::npos) << "no JSON summary in the demo's output:\n" << output;
  const nlohmann::json summary = nlohmann::json::parse(output.substr(line));
  EXPECT_GE(summary["test_accuracy"].get<double>(), 0.84) << output;
  EXPECT_LT(summary["final_loss"].get<double>(), 0.5) << output;
}

}  // namespace
