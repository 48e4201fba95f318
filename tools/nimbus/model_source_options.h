// The options `nimbus evaluate` and `nimbus predict` share: which trained model, which data.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nimbus/train/trained_model.h"

namespace nimbus::cli {

struct ModelSourceArguments {
  std::string source, checkpoint = "last", config_path, images, labels, split = "validation", loss, device;
  std::vector<std::string> overrides, metrics;
  double scale = 1.0 / 255;
  bool from_logits = false;
  int64_t batch_size = 0;
};

void add_model_source_options(CLI::App& command, ModelSourceArguments& arguments, bool with_labels);
train::TrainedModel load_model_source(const ModelSourceArguments& arguments);
// The data section to read: --images/--labels, else the config's data.<split>.
nlohmann::json data_split(const ModelSourceArguments& arguments, const train::TrainedModel& trained, bool with_labels);
// --batch-size, else the config's fit.batch_size, else 32.
int64_t batch_size(const ModelSourceArguments& arguments, const train::TrainedModel& trained);

}  // namespace nimbus::cli
