// The Fashion-MNIST MLP (examples/fashion_mnist_mlp.yaml) trained for one
// epoch under each policy lands within 1 percentage point of float32's
// validation accuracy (same seed, same data order). Runs from the repository
// root, where the example config lives.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "nimbus/train/config.h"

namespace nimbus {
namespace {

double validation_accuracy(const std::string& precision) {
  const std::string run_dir =
      (std::filesystem::temp_directory_path() / ("nimbus_mlp_" + precision + "_" + std::to_string(::getpid())))
          .string();
  const nlohmann::json config = train::load_config("examples/fashion_mnist_mlp.yaml",
                                                   {"fit.epochs=1", "fit.verbose=0", "runtime.precision=" + precision});
  std::ostringstream out;
  const nlohmann::json summary = train::run_config(config, out, {.run_dir = run_dir});
  std::filesystem::remove_all(run_dir);
  return summary.at("final").at("val_accuracy").get<double>();
}

TEST(MlpPolicies, OneEpochUnderEachPolicyIsWithinOnePointOfFloat32) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    // scripts/install-deps puts the data set there; a tree without it cannot run the example.
    GTEST_SKIP() << "Fashion-MNIST is not in /usr/share/datasets/fashion-mnist (scripts/install-deps)";
  }
  const double f32 = validation_accuracy("float32");
  EXPECT_GT(f32, 0.80);
  for (const char* policy : {"mixed_float16", "mixed_bfloat16"}) {
    const double mixed = validation_accuracy(policy);
    EXPECT_NEAR(mixed, f32, 0.01) << policy << ": " << mixed << " vs float32 " << f32;
  }
}

}  // namespace
}  // namespace nimbus
