// The MLP of examples/fashion_mnist_mlp.yaml (Adam, sparse cross-entropy from
// logits, accuracy) trained a few steps through the config path with
// `runtime.device` set: the same seed gives the same initial weights on every
// device, and the batches are seeded random images (no dataset files needed).
// tests/train (a logical CPU device) and tests/gpu_train (CUDA) compare runs.
#pragma once

#include <string>
#include <vector>

#include "nimbus/nimbus.h"
#include "nimbus/train/config.h"

namespace nimbus::testing {

struct ConfigRun {
  std::vector<double> losses;   // the running mean after each step, as the progress bar shows it
  std::vector<Tensor> weights;  // host copies, after the last step
  std::vector<Device> weight_devices, optimizer_devices;
};

class LossRecorder : public train::Callback {
 public:
  explicit LossRecorder(std::vector<double>& losses) : losses_(losses) {}
  void on_train_batch_end(train::Trainer&, int64_t, const train::Logs& logs) override {
    losses_.push_back(logs.at("loss"));
  }

 private:
  std::vector<double>& losses_;
};

inline ConfigRun train_mlp_config_on(const std::string& device, int steps, int64_t batch_size = 32) {
  const nlohmann::json config = train::load_config("examples/fashion_mnist_mlp.yaml", {"runtime.device=" + device});
  train::configure_runtime_from_config(config);  // the config's seed: the same initial weights everywhere
  train::Trainer trainer = train::compile_from_config(train::model_from_train_config(config), config);
  Generator gen(5);
  const int64_t samples = batch_size * steps;
  const Tensor x = random_uniform({samples, 28, 28, 1}, 0, 1, DType::kF32, Device::cpu(), &gen);
  const Tensor y = cast(random_uniform({samples}, 0, 10, DType::kF64, Device::cpu(), &gen), DType::kU8);
  ConfigRun run;
  train::FitOptions options;
  options.batch_size = batch_size;
  options.shuffle = false;
  options.verbose = 0;
  options.callbacks = {std::make_shared<LossRecorder>(run.losses)};
  trainer.fit(x, y, options);
  for (const Variable& w : trainer.model().weights()) {
    run.weight_devices.push_back(w.value().device());
    run.weights.push_back(w.value().to(Device::cpu()));
  }
  for (const Variable& v : trainer.optimizer().variables()) run.optimizer_devices.push_back(v.value().device());
  return run;
}

}  // namespace nimbus::testing
