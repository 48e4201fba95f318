#include "model_source_options.h"

#include <fmt/format.h>

#include <iostream>

#include "flag_checks.h"
#include "nimbus/base/error.h"
#include "nimbus/device/device_choice.h"

namespace nimbus::cli {

void add_model_source_options(CLI::App& command, ModelSourceArguments& arguments, bool with_labels) {
  command.add_option("source", arguments.source, "a run directory (runs/<date-time>) or a file model.save wrote")
      ->required()
      ->check(non_empty("a run directory or a file model.save wrote"));
  command
      .add_option("--checkpoint", arguments.checkpoint,
                  "run directories: last (newest intact checkpoint), best, or a checkpoint file")
      ->check(non_empty("last, best or a checkpoint file"));
  command
      .add_option("--config", arguments.config_path,
                  "a config whose compile and data sections apply (default: the run directory's config.json)")
      ->check(non_empty("a config file, or leave the flag out for the run directory's config.json"));
  command.add_option("--set", arguments.overrides, "key.path=value: set a key of that config (repeatable)");
  command
      .add_option("--device", arguments.device,
                  "where to run, over the config's runtime.device: auto (the default without a config), cpu, cuda "
                  "or cuda:N")
      ->check(device_name());
  command.add_option("--split", arguments.split, "the config's data split to use: validation or train")
      ->check(CLI::IsMember({"validation", "train"}));
  command.add_option("--images", arguments.images, "IDX images instead of the config's data")
      ->check(non_empty("an IDX file"));
  if (with_labels) {
    command.add_option("--labels", arguments.labels, "IDX labels, with --images")->check(non_empty("an IDX file"));
  }
  command.add_option("--scale", arguments.scale, "with --images: the factor applied to the pixels (default 1/255)")
      ->check(positive_real(1e6));
  command.add_option("--batch-size", arguments.batch_size, "samples per batch (default: fit.batch_size, else 32)")
      ->check(whole_number(1, int64_t{1} << 30));
  if (with_labels) {
    command.add_option("--loss", arguments.loss,
                       "a saved model without --config: the loss (default sparse_categorical_crossentropy)");
    command.add_flag("--from-logits", arguments.from_logits, "a saved model without --config: the outputs are logits");
    command.add_option("--metrics", arguments.metrics, "a saved model without --config: metrics (default accuracy)");
  }
}

train::TrainedModel load_model_source(const ModelSourceArguments& arguments) {
  // A device this machine or build lacks is refused naming the flag, before the model loads.
  if (!arguments.device.empty()) choose_device(arguments.device, "--device", probe_gpus());
  train::TrainedModelOptions options{.checkpoint = arguments.checkpoint,
                                     .config_path = arguments.config_path,
                                     .overrides = arguments.overrides,
                                     .device = arguments.device};
  options.loss =
      nlohmann::json{{"name", arguments.loss.empty() ? std::string("sparse_categorical_crossentropy") : arguments.loss},
                     {"from_logits", arguments.from_logits}};
  if (!arguments.metrics.empty()) options.metrics = arguments.metrics;
  return train::load_trained_model(arguments.source, options, std::cerr);
}

nlohmann::json data_split(const ModelSourceArguments& arguments, const train::TrainedModel& trained, bool with_labels) {
  if (!arguments.images.empty()) {
    if (with_labels && arguments.labels.empty()) throw InvalidArgument("--images needs --labels");
    nlohmann::json split = {{"images", arguments.images}, {"scale", arguments.scale}};
    if (with_labels) split["labels"] = arguments.labels;
    return split;
  }
  if (trained.config.is_null()) {
    throw InvalidArgument(fmt::format("{}: no data to use", arguments.source),
                          "pass --images FILE (and --labels FILE), or --config CONFIG.yaml");
  }
  const nlohmann::json& data = trained.config.at("data");
  if (!data.contains(arguments.split)) {
    throw InvalidArgument(fmt::format("the config has no data.{} section", arguments.split),
                          "pass --split train, or --images FILE");
  }
  return data.at(arguments.split);
}

int64_t batch_size(const ModelSourceArguments& arguments, const train::TrainedModel& trained) {
  if (arguments.batch_size > 0) return arguments.batch_size;
  if (!trained.config.is_null()) return trained.config.at("fit").at("batch_size").get<int64_t>();
  return 32;
}

}  // namespace nimbus::cli
