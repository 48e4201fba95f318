// A trained model to evaluate or predict with (`nimbus evaluate`, `nimbus predict`): from a run
// directory (its config.json and one of its checkpoints) or from a file model.save wrote.
//
//   train::TrainedModel trained = train::load_trained_model("runs/2026-11-30T15-40-02", {.checkpoint = "best"},
//   std::cerr); auto [x, y] = train::load_idx_split(trained.config["data"]["validation"], trained.trainer.model(),
//   "data.validation"); train::Logs scores = trained.trainer.evaluate(x, y);
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nimbus/device/device_choice.h"
#include "nimbus/train/trainer.h"

namespace nimbus::train {

struct TrainedModelOptions {
  // For run directories: "last" (the newest intact checkpoint), "best" (checkpoints/best.safetensors),
  // or a checkpoint file.
  std::string checkpoint = "last";
  // A config whose compile (and data) sections apply; a run directory's config.json by default.
  std::string config_path{};
  std::vector<std::string> overrides{};
  // The device to run on (--device: auto, cpu, cuda, cuda:N), over the config's runtime.device; empty:
  // the config's, or auto for a saved model given without a config.
  std::string device{};
  // A saved model without a config is compiled with this loss (a name, or {name, from_logits, ...})
  // and these metrics.
  nlohmann::json loss = "sparse_categorical_crossentropy";
  std::vector<std::string> metrics = {"accuracy"};
};

struct TrainedModel {
  Trainer trainer;
  // The config in effect (null for a saved model given without one).
  nlohmann::json config;
  // The file the weights came from.
  std::string weights_path;
  // Where the model runs, and why ("cpu:0 (auto: this build has no CUDA backend)").
  DeviceChoice device;
};

// NotFound when `source` does not exist; DataError when no intact checkpoint or model loads
// (refused checkpoints are reported to `warnings`, as --resume does).
TrainedModel load_trained_model(const std::string& source, const TrainedModelOptions& options, std::ostream& warnings);

}  // namespace nimbus::train
