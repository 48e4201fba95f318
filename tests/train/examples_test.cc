// The functional examples (residual CNN, transformer) build from their YAML and
// learn: over 30 steps of 32 images from Fashion-MNIST the second 15 steps' mean loss is below
// the first 15's.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "nimbus/nn/model.h"
#include "nimbus/train/config.h"
#include "train_test_util.h"

namespace nimbus::testing {
namespace {

class FunctionalExamples : public ::testing::TestWithParam<const char*> {};

TEST_P(FunctionalExamples, TrainAndTheLossFalls) {
  const std::string file = std::string("examples/") + GetParam();
  nlohmann::json config =
      train::load_config(file, {"fit.epochs=2", "fit.steps_per_epoch=15", "fit.batch_size=32", "fit.verbose=0"});
  const std::string images = config["data"]["train"]["images"].get<std::string>();
  // Skips only on a machine set up by hand without scripts/install-deps, which installs it on every
  // machine that runs the suite (CI included): the skip names the package rather than failing obscurely.
  if (!std::filesystem::exists(images))
    GTEST_SKIP() << images << " is missing (scripts/install-deps installs the dataset-fashion-mnist package)";
  config["data"].erase("validation");  // 10,000 validation images would dominate a 30-step test
  std::ostringstream out;
  const std::filesystem::path run_dir =
      std::filesystem::temp_directory_path() / ("nimbus_example_" + std::string(GetParam()));
  std::filesystem::remove_all(run_dir);
  const nlohmann::json summary = train::run_config(config, out, {.run_dir = run_dir.string()});
  std::filesystem::remove_all(run_dir);
  ASSERT_EQ(summary["epochs"].size(), 2u) << out.str();
  const double first = summary["epochs"][0]["loss"].get<double>(), second = summary["epochs"][1]["loss"].get<double>();
  EXPECT_LT(first, 2.4) << "a fresh 10-class model starts near ln 10 = 2.30";
  EXPECT_LT(second, first * 0.85) << out.str();
}

INSTANTIATE_TEST_SUITE_P(Examples, FunctionalExamples,
                         ::testing::Values("fashion_mnist_resnet.yaml", "fashion_mnist_transformer.yaml"),
                         [](const auto& info) {
                           std::string name = info.param;
                           return name.substr(0, name.find('.'));
                         });

}  // namespace
}  // namespace nimbus::testing
