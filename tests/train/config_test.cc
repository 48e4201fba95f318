// Configs for `nimbus train`: the examples build the peers' models, every key is
// checked (unknown keys and wrong types name the line and the closest key),
// overrides, and a small run end to end on IDX files.
#include "nimbus/train/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "nimbus/base/error.h"
#include "nimbus/data/idx.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "train_test_util.h"

namespace nimbus::testing {
namespace {

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return error.message() + " | " + error.hint();
  }
  return "(no error)";
}

const char* kSmall = R"(model:
  input_shape: [4, 4, 1]
  layers:
    - Flatten: {}
    - Dense: {units: 3}
data:
  train: {images: a.idx, labels: b.idx}
fit:
  epochs: 2
)";

TEST(Config, ExamplesBuildThePeersModels) {
  // Parameter counts of the peers' torch models: MLP 535,818; CNN 421,642.
  for (const auto& [file, params] :
       {std::pair{"examples/fashion_mnist_mlp.yaml", 535818}, std::pair{"examples/fashion_mnist_cnn.yaml", 421642}}) {
    const nlohmann::json config = train::load_config(file);
    nn::Sequential model({}, "probe");
    model.add(nn::Input(config["model"]["input_shape"].get<nn::Dims>()));
    for (const auto& entry : config["model"]["layers"]) {
      model.add(nn::layer_from_config(entry.begin().key(), entry.begin().value()));
    }
    EXPECT_EQ(model.count_params(), params) << file;
    EXPECT_EQ(config["fit"]["batch_size"], 128);
    EXPECT_EQ(config["compile"]["metrics"], nlohmann::json({"accuracy"}));
    EXPECT_EQ(config["fit"]["gradient_accumulation"], 1);  // a default filled in
  }
}

TEST(Config, UnknownKeysAndWrongTypesNameLineAndClosestKey) {
  const std::string typo = error_of([] { train::parse_config(std::string(kSmall) + "  epoch: 3\n", "small.yaml"); });
  EXPECT_NE(typo.find("small.yaml:10: unknown key 'fit.epoch'"), std::string::npos) << typo;
  EXPECT_NE(typo.find("did you mean 'fit.epochs'?"), std::string::npos) << typo;
  const std::string type = error_of([] {
    std::string text = kSmall;
    text.replace(text.find("epochs: 2"), 9, "epochs: five");
    train::parse_config(text, "small.yaml");
  });
  EXPECT_NE(type.find("small.yaml:9: fit.epochs must be an integer, got \"five\""), std::string::npos) << type;
  const std::string layer = error_of([] {
    std::string text = kSmall;
    text.replace(text.find("units: 3"), 8, "unit: 3, units: 3");
    train::parse_config(text, "small.yaml");
  });
  EXPECT_NE(layer.find("small.yaml:5: layer 1 (Dense) has no argument 'unit'"), std::string::npos) << layer;
  EXPECT_NE(layer.find("did you mean 'units'?"), std::string::npos) << layer;
  const std::string section =
      error_of([] { train::parse_config(std::string(kSmall) + "runtim:\n  threads: 2\n", "s"); });
  EXPECT_NE(section.find("unknown key 'runtim'"), std::string::npos) << section;
  const std::string frequency = error_of([] { train::parse_config(kSmall, "s", {"checkpoint.save_freq=often"}); });
  EXPECT_NE(frequency.find("checkpoint.save_freq must be epoch or a number of steps"), std::string::npos) << frequency;
}

TEST(Config, OverridesSetKnownKeysOnly) {
  const nlohmann::json config = train::parse_config(
      kSmall, "small.yaml", {"fit.epochs=7", "runtime.jit=false", "compile.optimizer.learning_rate=0.01"});
  EXPECT_EQ(config["fit"]["epochs"], 7);
  EXPECT_EQ(config["runtime"]["jit"], false);
  EXPECT_EQ(config["compile"]["optimizer"], nlohmann::json({{"name", "adam"}, {"learning_rate", 0.01}}));
  // The run directory's keys are known to --set too, with their types.
  const nlohmann::json run = train::parse_config(
      kSmall, "s", {"checkpoint.save_freq=50", "checkpoint.max_to_keep=2", "tensorboard.update_freq=epoch"});
  EXPECT_EQ(run["checkpoint"]["save_freq"], 50);
  EXPECT_EQ(run["checkpoint"]["max_to_keep"], 2);
  EXPECT_EQ(run["checkpoint"]["save_best"], true);  // a default filled in
  EXPECT_EQ(run["tensorboard"]["update_freq"], "epoch");
  const std::string unknown = error_of([] { train::parse_config(kSmall, "s", {"fit.batchsize=3"}); });
  EXPECT_NE(unknown.find("unknown key 'fit.batchsize'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("did you mean 'fit.batch_size'?"), std::string::npos) << unknown;
  const std::string bad = error_of([] { train::parse_config(kSmall, "s", {"runtime.graph=maybe"}); });
  EXPECT_NE(bad.find("runtime.graph must be a boolean"), std::string::npos) << bad;
}

TEST(Config, RunsEndToEndOnIdxFilesAndSummarizes) {
  const auto dir = std::filesystem::temp_directory_path() / ("nimbus_config_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  // 64 images 4x4: the class is which quarter of the image is bright.
  std::vector<uint8_t> pixels(64 * 16, 10), labels(64);
  for (int i = 0; i < 64; ++i) {
    labels[i] = static_cast<uint8_t>(i % 4);
    const int row = (i % 4) / 2 * 2, col = (i % 4) % 2 * 2;
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 2; ++c) pixels[i * 16 + (row + r) * 4 + col + c] = static_cast<uint8_t>(200 + i % 50);
  }
  data::write_idx((dir / "images.idx").string(), Tensor::from_vector<uint8_t>(pixels, {64, 4, 4}));
  data::write_idx((dir / "labels.idx").string(), Tensor::from_vector<uint8_t>(labels, {64}));
  const std::string images = (dir / "images.idx").string(), labels_file = (dir / "labels.idx").string();
  const std::string text =
      "model:\n  input_shape: [4, 4, 1]\n  layers:\n    - Flatten: {}\n    - Dense: {units: 4}\n"
      "compile:\n  optimizer: {name: adam, learning_rate: 0.05}\n"
      "  loss: {name: sparse_categorical_crossentropy, from_logits: true}\n"
      "  metrics: [accuracy]\n"
      "data:\n  train: {images: " +
      images + ", labels: " + labels_file +
      "}\n"
      "  validation: {images: " +
      images + ", labels: " + labels_file +
      "}\n"
      "fit: {epochs: 2, batch_size: 16}\n";
  std::ostringstream out;
  const nlohmann::json summary = train::run_config(train::parse_config(text, "run.yaml", {"fit.epochs=20"}), out,
                                                   {.run_dir = (dir / "run").string()});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(summary["steps"], 20 * 4);
  EXPECT_EQ(summary["samples_total"], 20 * 64);
  ASSERT_EQ(summary["epochs"].size(), 20u);
  EXPECT_TRUE(summary["epochs"][0].contains("val_accuracy"));
  EXPECT_GT(summary["final"]["val_accuracy"].get<double>(), 0.95) << out.str();
  EXPECT_GT(summary["samples_per_sec"].get<double>(), 0);
  EXPECT_GT(summary["peak_rss_bytes"].get<int64_t>(), 0);
  EXPECT_NE(out.str().find("Epoch 20/20"), std::string::npos);
}

}  // namespace
}  // namespace nimbus::testing
