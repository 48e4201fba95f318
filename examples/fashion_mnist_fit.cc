// Trains the peers' Fashion-MNIST MLP (784-512-256-10) or CNN
// (conv32-pool-conv64-pool-dense128-dense10) with nn::Sequential and
// train::Trainer::fit, Adam 1e-3, in graph mode (default) or eagerly, on the CPU or a GPU,
// in float32 or a mixed-precision policy.
//
//   build/release/examples/fashion_mnist_fit [--model mlp|cnn] [--epochs 1] [--batch 128]
//                                            [--eager] [--no-jit] [--threads 2] [--steps N] [--json]
//                                            [--device cpu|cuda] [--precision mixed_bfloat16]
//
// Prints the model summary, Keras's progress lines and the test accuracy;
// --json adds one line with samples_per_sec (after the first 20 steps) and the accuracies.
// --data names a folder with the four files, gzip'd (*-ubyte.gz) or not (*-ubyte).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "nimbus/data/idx.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/nimbus.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/train/trainer.h"

namespace {

using nimbus::Tensor;
namespace nn = nimbus::nn;
namespace train = nimbus::train;

// dir/name.gz, else dir/name (gunzipped: a build without zlib reads those).
std::string idx_file(const std::string& dir, const std::string& name) {
  const std::string gzipped = dir + "/" + name + ".gz";
  return std::filesystem::exists(gzipped) ? gzipped : dir + "/" + name;
}

// Images as f32 (N, 28, 28, 1) in [0, 1], like the peers' (ToTensor scaling); labels u8.
std::pair<Tensor, Tensor> load_split(const std::string& dir, const std::string& prefix) {
  Tensor images = nimbus::data::read_idx(idx_file(dir, prefix + "-images-idx3-ubyte"));
  Tensor labels = nimbus::data::read_idx(idx_file(dir, prefix + "-labels-idx1-ubyte"));
  images = nimbus::reshape(images.to(nimbus::DType::kF32) / 255.0, std::vector<int64_t>{images.dim(0), 28, 28, 1});
  return {images, labels};
}

nn::Sequential make_model(const std::string& kind) {
  if (kind == "mlp") {
    return nn::Sequential({nn::InputLayer({28, 28, 1}), nn::Flatten(), nn::Dense(512, {.activation = "relu"}),
                           nn::Dense(256, {.activation = "relu"}), nn::Dense(10)},
                          "fashion_mnist_mlp");
  }
  return nn::Sequential(
      {nn::InputLayer({28, 28, 1}), nn::Conv2D(32, {3, 3}, {.padding = "same", .activation = "relu"}),
       nn::MaxPooling2D({2, 2}), nn::Conv2D(64, {3, 3}, {.padding = "same", .activation = "relu"}),
       nn::MaxPooling2D({2, 2}), nn::Flatten(), nn::Dense(128, {.activation = "relu"}), nn::Dense(10)},
      "fashion_mnist_cnn");
}

}  // namespace

int main(int argc, char** argv) {
  nimbus::reexec_with_omp_defaults(argc, argv);
  CLI::App app{"Fashion-MNIST with nn::Sequential and fit"};
  std::string kind = "mlp", data_dir = nimbus::data::kFashionMnistDir, device = "cpu", precision = "float32";
  int epochs = 1, threads = 2;
  int64_t batch = 128, steps = 0;
  uint64_t seed = 1;
  bool eager = false, no_jit = false, json = false;
  app.add_option("--model", kind)->check(CLI::IsMember({"mlp", "cnn"}));
  app.add_option("--epochs", epochs)->check(CLI::PositiveNumber);
  app.add_option("--batch", batch)->check(CLI::PositiveNumber);
  app.add_option("--steps", steps, "cap the steps per epoch (0: all)");
  app.add_option("--threads", threads, "compute threads (0 = all cores)");
  app.add_option("--seed", seed);
  app.add_option("--data", data_dir);
  app.add_flag("--eager", eager, "run every step eagerly (runtime.graph = false)");
  app.add_flag("--no-jit", no_jit, "graph mode without elementwise fusion (runtime.jit = false)");
  app.add_flag("--json", json, "print a JSON summary line at the end");
  app.add_option("--device", device, "cpu, cuda or cuda:N (one replica there: weights, optimizer state, batches)");
  app.add_option("--precision", precision, "the layers' dtype policy")
      ->check(CLI::IsMember({"float32", "mixed_bfloat16", "mixed_float16"}));
  CLI11_PARSE(app, argc, argv);
  try {
    nimbus::configure_runtime({.threads = threads, .seed = seed, .graph = !eager, .jit = !no_jit});
    nn::set_global_policy(precision);
    const auto [x_train, y_train] = load_split(data_dir, "train");
    const auto [x_test, y_test] = load_split(data_dir, "t10k");
    nn::Sequential model = make_model(kind);
    model.summary();
    train::Trainer trainer =
        train::compile(model, {.optimizer = train::Adam({.learning_rate = 1e-3}),
                               .loss = train::SparseCategoricalCrossentropy({.from_logits = true}),
                               .metrics = {"accuracy"},
                               .strategy = nimbus::distribute::OneDevice(nimbus::Device::parse(device))});
    // The test loss before training, so that a run shows its loss falling.
    const double first_loss = trainer.evaluate(x_test, y_test, {.batch_size = batch}).at("loss");
    train::FitOptions options{
        .epochs = epochs, .batch_size = batch, .seed = seed, .validation_data = {{x_test, y_test}}};
    if (steps > 0) options.steps_per_epoch = steps;
    const train::History history = trainer.fit(x_train, y_train, options);
    const double accuracy = history.history.at("val_accuracy").back();
    std::cout << fmt::format("{} {} on {}, {}: {:.0f} samples/s (after the first 20 steps), test accuracy {:.4f}\n",
                             kind, eager ? "eager" : (no_jit ? "graph" : "graph+jit"), device, precision,
                             history.samples_per_sec, accuracy);
    if (json) {
      std::cout
          << fmt::format(
                 R"({{"model": "{}", "mode": "{}", "device": "{}", "precision": "{}", "batch": {}, "threads": {}, "samples_per_sec": {:.1f}, "val_accuracy": {:.4f}, "accuracy": {:.4f}, "first_loss": {:.4f}, "loss": {:.4f}, "epochs": {}, "wall_seconds": {:.2f}}})",
                 kind, eager ? "eager" : (no_jit ? "graph" : "graph+jit"), device, precision, batch, threads,
                 history.samples_per_sec, accuracy, history.history.at("accuracy").back(), first_loss,
                 history.history.at("loss").back(), epochs, history.wall_seconds)
          << "\n";
    }
  } catch (const nimbus::Error& error) {
    std::cerr << "fashion_mnist_fit: " << nimbus::error_kind_name(error.kind()) << ": " << error.what() << "\n";
    return 1;
  }
  return 0;
}
