// The TFRecord example end to end: `nimbus data to-tfrecord` converts Fashion-MNIST's IDX files
// into gzip-compressed shards of tf.train.Example, and examples/fashion_mnist_tfrecord.yaml trains
// the MLP from them as well as the IDX config does.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "nimbus/data/example.h"
#include "nimbus/data/idx.h"
#include "nimbus/data/tfrecord.h"
#include "nimbus/train/config.h"

namespace nimbus::train {
namespace {

namespace fs = std::filesystem;

std::string fashion_mnist(const std::string& name) { return std::string(data::kFashionMnistDir) + "/" + name; }

class TfrecordTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(fashion_mnist("train-images-idx3-ubyte.gz"))) {
      // scripts/install-deps installs Debian's dataset-fashion-mnist; a machine without it cannot run these.
      GTEST_SKIP() << "Fashion-MNIST is not installed (" << data::kFashionMnistDir << ")";
    }
    // One folder per process: ctest runs each test in its own process, several at once.
    shards_ = fs::temp_directory_path() / ("nimbus_fmnist_tfrecord_" + std::to_string(getpid()));
    fs::remove_all(shards_);
    const std::string command = std::string(NIMBUS_CLI) + " data to-tfrecord --shards 3 -o " + shards_.string();
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  void TearDown() override { fs::remove_all(shards_); }
  fs::path shards_;
};

TEST_F(TfrecordTraining, ShardsHoldTheIdxSamplesInOrder) {
  for (const char* split : {"train", "test"}) {
    for (int k = 0; k < 3; ++k) {
      EXPECT_TRUE(fs::exists(shards_ / fmt::format("{}-{:05d}-of-00003.tfrecord.gz", split, k))) << split << " " << k;
    }
  }
  const Tensor images = data::read_idx(fashion_mnist("t10k-images-idx3-ubyte.gz"));
  const Tensor labels = data::read_idx(fashion_mnist("t10k-labels-idx1-ubyte.gz"));
  // The second shard starts at sample 10000 / 3 = 3333.
  data::TFRecordReader reader((shards_ / "test-00001-of-00003.tfrecord.gz").string(), data::Compression::kGzip);
  const std::optional<std::string> record = reader.read();
  ASSERT_TRUE(record);
  const auto features = data::decode_example(*record);
  ASSERT_EQ(features.size(), 2u);
  for (const auto& feature : features) {
    if (feature.name == "image") {
      const std::string& pixels = std::get<data::BytesList>(feature.value).values.at(0);
      ASSERT_EQ(pixels.size(), 784u);
      EXPECT_EQ(std::memcmp(pixels.data(), static_cast<const char*>(images.raw_data()) + 3333 * 784, 784), 0);
    } else {
      ASSERT_EQ(feature.name, "label");
      EXPECT_EQ(std::get<data::Int64List>(feature.value).values.at(0), labels.data<uint8_t>()[3333]);
    }
  }
}

nlohmann::json train(const std::string& config_path, std::vector<std::string> overrides, const std::string& run) {
  // Both runs see the samples in file order (no shuffling) for 60 steps of 128, then the test set.
  for (const char* o : {"fit.shuffle=false", "fit.epochs=1", "fit.steps_per_epoch=60", "fit.verbose=0"}) {
    overrides.push_back(o);
  }
  const nlohmann::json config = load_config(config_path, overrides);
  std::ostringstream out;
  const std::string run_dir = (fs::temp_directory_path() / (run + std::to_string(getpid()))).string();
  fs::remove_all(run_dir);
  nlohmann::json summary = run_config(config, out, {.run_dir = run_dir});
  fs::remove_all(run_dir);
  return summary;
}

TEST_F(TfrecordTraining, TrainsLikeTheIdxConfig) {
  const nlohmann::json from_idx = train("examples/fashion_mnist_mlp.yaml", {}, "nimbus_fmnist_idx_run");
  const nlohmann::json from_tfrecord =
      train("examples/fashion_mnist_tfrecord.yaml",
            {"data.train.files=" + (shards_ / "train-*.tfrecord.gz").string(),
             "data.validation.files=" + (shards_ / "test-*.tfrecord.gz").string(), "data.train.shuffle=0"},
            "nimbus_fmnist_tfrecord_run");
  const double idx_accuracy = from_idx["final"]["val_accuracy"].get<double>();
  const double tfrecord_accuracy = from_tfrecord["final"]["val_accuracy"].get<double>();
  std::cout << "val_accuracy: IDX " << idx_accuracy << ", TFRecord " << tfrecord_accuracy << "\n";
  EXPECT_GT(tfrecord_accuracy, 0.70);  // it learns: 10 classes, chance is 0.10
  // The same pixels (u8 times 1/255 in f32), order, seed and steps: the same result (equal when
  // measured; the tolerance leaves room for float sums in another order on another machine).
  EXPECT_NEAR(tfrecord_accuracy, idx_accuracy, 0.002);
  // The pipeline's statistics and its input wait are in the run's summary.
  ASSERT_TRUE(from_tfrecord.contains("input_pipeline")) << from_tfrecord.dump();
  EXPECT_GT(from_tfrecord["input_pipeline"]["nodes"].size(), 3u);
  EXPECT_TRUE(from_tfrecord.contains("input_wait_seconds_total")) << from_tfrecord.dump();
}

}  // namespace
}  // namespace nimbus::train
