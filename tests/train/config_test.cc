// Configs for `nimbus train`: the examples build the peers' models, every key is
// checked (unknown keys and wrong types name the line and the closest key),
// overrides, and a small run end to end on IDX files.
#include "nimbus/train/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "nimbus/base/error.h"
#include "nimbus/data/idx.h"
#include "nimbus/device/backend.h"
#include "nimbus/device/device_choice.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/train/from_config.h"
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

// w after two steps of `optimizer` from w = 1 with gradients 1 then -1.
double after_two_steps(train::Optimizer& optimizer) {
  Variable w(Tensor::from_vector<double>({1.0}, {1}), "w", true);
  optimizer.build({w});
  for (const double g : {1.0, -1.0}) optimizer.apply_gradients({Tensor::from_vector<double>({g}, {1})}, {w});
  return w.value().to_vector<double>()[0];
}

TEST(Config, KerasOptimizerNamesKeepEveryArgument) {
  // SGD with momentum 0.9, rate 0.1: v = 0.9 v - 0.1 g; w += v. Without the momentum, w would be 1.
  auto sgd = train::optimizer_from_config({{"name", "SGD"}, {"learning_rate", 0.1}, {"momentum", 0.9}});
  double w = 1, v = 0;
  for (const double g : {1.0, -1.0}) v = 0.9 * v - 0.1 * g, w += v;
  EXPECT_NEAR(after_two_steps(*sgd), w, 1e-12);
  EXPECT_NE(w, 1.0);
  // Adam with beta_1 0.5, by Keras's rule (optimizers.h); the default 0.9 would give another w.
  auto adam = train::optimizer_from_config({{"name", "Adam"}, {"learning_rate", 0.1}, {"beta_1", 0.5}});
  auto adam_rule = [](double beta_1) {
    double w = 1, m = 0, v = 0;
    int t = 0;
    for (const double g : {1.0, -1.0}) {
      ++t;
      m = beta_1 * m + (1 - beta_1) * g;
      v = 0.999 * v + 0.001 * g * g;
      w -= 0.1 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(beta_1, t)) * m / (std::sqrt(v) + 1e-7);
    }
    return w;
  };
  EXPECT_NEAR(after_two_steps(*adam), adam_rule(0.5), 1e-9);
  EXPECT_GT(std::abs(adam_rule(0.5) - adam_rule(0.9)), 0.01);
  // Both spellings name one optimizer; an argument the optimizer does not take is refused, not dropped.
  EXPECT_EQ(train::optimizer_from_config("rmsprop")->name(), train::optimizer_from_config("RMSprop")->name());
  const std::string dropped = error_of([] { train::optimizer_from_config({{"name", "SGD"}, {"beta_1", 0.5}}); });
  EXPECT_NE(dropped.find("SGD takes no argument 'beta_1'"), std::string::npos) << dropped;
  const std::string range = error_of([] { train::optimizer_from_config({{"name", "adam"}, {"beta_1", 1.0}}); });
  EXPECT_NE(range.find("beta_1 must be in [0, 1), got 1"), std::string::npos) << range;
  const std::string loss = error_of([] { train::loss_from_config({{"name", "mae"}, {"from_logits", true}}); });
  EXPECT_NE(loss.find("MeanAbsoluteError takes no argument 'from_logits'"), std::string::npos) << loss;
}

// The error of kSmall with `from` replaced by `to` (and `overrides`), message and hint.
std::string refusal(const std::string& from, const std::string& to, const std::vector<std::string>& overrides = {}) {
  std::string text = kSmall;
  if (!from.empty()) text.replace(text.find(from), from.size(), to);
  return error_of([&] { train::parse_config(text, "small.yaml", overrides); });
}

TEST(Config, ValidationNamesLineKeyAndRemedy) {
  EXPECT_NE(refusal("epochs: 2", "epochs: -1").find("small.yaml:9: fit.epochs is -1; it must be at least 1"),
            std::string::npos);
  EXPECT_NE(refusal("epochs: 2", "epochs: .inf").find("small.yaml:9: fit.epochs must be an integer, got .inf"),
            std::string::npos);
  EXPECT_NE(refusal("epochs: 2", "epochs: 2\n  initial_epoch: 2").find("fit.initial_epoch (2) leaves no epoch"),
            std::string::npos);
  EXPECT_NE(refusal("epochs: 2", "epochs: 2\n  batch_size:").find("small.yaml:10: fit.batch_size is empty"),
            std::string::npos);
  const std::string accumulation = refusal("epochs: 2", "epochs: 2\n  batch_size: 10\n  gradient_accumulation: 4");
  EXPECT_NE(accumulation.find("small.yaml:11: fit.gradient_accumulation 4 does not divide fit.batch_size 10"),
            std::string::npos)
      << accumulation;
  EXPECT_NE(accumulation.find("e.g. 8"), std::string::npos) << accumulation;
  const std::string flag = refusal("", "", {"fit.steps_per_epoch=-2"});
  EXPECT_NE(flag.find("--set fit.steps_per_epoch=-2: fit.steps_per_epoch is -2"), std::string::npos) << flag;
  const std::string type = refusal("", "", {"fit.epochs=five"});
  EXPECT_NE(type.find("--set fit.epochs=five: fit.epochs must be an integer"), std::string::npos) << type;
  const std::string empty = refusal("", "", {"fit.batch_size="});
  EXPECT_NE(empty.find("--set fit.batch_size=: no value after '='"), std::string::npos) << empty;
  const std::string rate = refusal("", "", {"compile.optimizer.learning_rate=-0.1"});
  EXPECT_NE(rate.find("--set compile.optimizer.learning_rate=-0.1: compile.optimizer.learning_rate: AdamW: "
                      "learning_rate must be a finite number >= 0, got -0.1"),
            std::string::npos)
      << rate;
}

TEST(Config, LayerErrorsNameLineAndLayerIndex) {
  const std::string missing = refusal("units: 3", "activation: relu");
  EXPECT_NE(missing.find("small.yaml:5: layer 1 (Dense): Dense: needs the argument 'units'"), std::string::npos)
      << missing;
  EXPECT_EQ(missing.find("json.exception"), std::string::npos) << missing;
  const std::string units = refusal("units: 3", "units: 0");
  EXPECT_NE(units.find("small.yaml:5: layer 1 (Dense): Dense: units must be positive"), std::string::npos) << units;
  const std::string type = refusal("units: 3", "units: 2.5");
  EXPECT_NE(type.find("layer 1 (Dense): Dense: the argument 'units' must be an integer, got 2.5"), std::string::npos)
      << type;
  const std::string names = refusal("- Flatten: {}", "- Flatten: {name: f}\n    - Dense: {units: 2, name: f}");
  EXPECT_NE(names.find("small.yaml:5: layers 0 and 1 are both named 'f'"), std::string::npos) << names;
  const std::string empty = refusal("    - Flatten: {}\n    - Dense: {units: 3}\n", "    []\n");
  EXPECT_NE(empty.find("model.layers is empty"), std::string::npos) << empty;
}

TEST(Config, ASequentialRefusesARepeatedLayerName) {
  nn::Sequential model({}, "twice");
  model.add(nn::Dense(2, {.name = "d"}));
  const std::string message = error_of([&] { model.add(nn::Dense(2, {.name = "d"})); });
  EXPECT_NE(message.find("Sequential 'twice': layer 1 (Dense) is named 'd', as layer 0 is"), std::string::npos)
      << message;
}

TEST(Config, AWeightLargerThanTheHostIsRefusedBeforeItIsAllocated) {
  nn::Sequential model({}, "huge");
  model.add(nn::Input({1 << 20}));
  const std::string message = error_of([&] { model.add(nn::Dense(int64_t{1} << 40)); });
  EXPECT_NE(message.find("(Dense)"), std::string::npos) << message;
  EXPECT_NE(message.find("its weight 'kernel' of shape [1048576, 1099511627776] in f32 needs"), std::string::npos)
      << message;
  EXPECT_NE(message.find("make the layer smaller"), std::string::npos) << message;
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
  EXPECT_GT(summary["host_peak_rss_bytes"].get<int64_t>(), 0);
  EXPECT_NE(out.str().find("Epoch 20/20"), std::string::npos);
  // runtime.device defaults to auto: the run's first line says what it took and why, as summary.json does.
  const DeviceChoice expected = choose_device("auto", "runtime.device", probe_gpus());
  EXPECT_TRUE(out.str().starts_with("device: " + expected.to_string() + "\n")) << out.str();
  EXPECT_EQ(summary["device"], expected.device.to_string());
  EXPECT_EQ(summary["device_reason"], expected.reason);
  EXPECT_EQ(summary["device_count"], 1);
  EXPECT_EQ(summary["device_names"], nlohmann::json::array({backend(expected.device.type).device_name(0)}));
}

TEST(Config, AutoTakesTheCpuForAStrategyThatReplicatesOverDevices) {
  const GpuProbe four_gpus{.cuda_backend = true, .gpu_count = 4};
  const nlohmann::json one_device = train::load_config("examples/fashion_mnist_mlp.yaml");
  EXPECT_EQ(one_device["runtime"]["device"], "auto");
  EXPECT_EQ(train::training_device_from_config(one_device, four_gpus).device, Device::cuda(0));
  const nlohmann::json mirrored =
      train::load_config("examples/fashion_mnist_mlp.yaml", {"runtime.strategy.type=mirrored"});
  const DeviceChoice choice = train::training_device_from_config(mirrored, four_gpus);
  EXPECT_EQ(choice.device, Device::cpu());
  EXPECT_THAT(choice.reason, ::testing::HasSubstr("runtime.strategy.type mirrored replicates over CPU devices"));
  // A device named explicitly is taken as named.
  const nlohmann::json named = train::load_config("examples/fashion_mnist_mlp.yaml", {"runtime.device=cuda:2"});
  EXPECT_EQ(train::training_device_from_config(named, four_gpus).device, Device::cuda(2));
}

}  // namespace
}  // namespace nimbus::testing
