#include "nimbus/train/trained_model.h"

#include <fmt/format.h>

#include <filesystem>

#include "nimbus/base/error.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/train/checkpoint.h"
#include "nimbus/train/config.h"
#include "nimbus/train/from_config.h"
#include "nimbus/train/run_directory.h"

namespace nimbus::train {

TrainedModel load_trained_model(const std::string& source, const TrainedModelOptions& options, std::ostream& warnings) {
  if (!std::filesystem::exists(source)) {
    throw NotFound(fmt::format("{}: no such run directory or saved model", source),
                   "pass a run directory (runs/<date-time>) or a file model.save wrote");
  }
  const bool run_directory = std::filesystem::is_directory(source);
  std::string config_path = options.config_path;
  if (config_path.empty() && run_directory) config_path = RunDirectory(source).config_path();
  nlohmann::json config;
  DeviceChoice device;
  if (!config_path.empty()) {
    std::vector<std::string> overrides = options.overrides;
    if (!options.device.empty()) overrides.push_back("runtime.device=" + options.device);
    config = load_config(config_path, overrides);
    device = configure_runtime_from_config(config);
  }
  if (!run_directory) {
    nn::Model model = nn::load_model(source);
    if (!config.is_null()) return {compile_from_config(model, config), config, source, device};
    device = choose_device(options.device.empty() ? "auto" : options.device, "--device", probe_gpus());
    return {compile(model, {.optimizer = SGD(),
                            .loss = loss_from_config(options.loss),
                            .metrics = options.metrics,
                            .strategy = distribute::OneDevice(device.device)}),
            config, source, device};
  }
  Trainer trainer = compile_from_config(model_from_train_config(config), config);
  const RunDirectory run(source);
  if (options.checkpoint == "last") {
    try {
      const CheckpointInfo checkpoint = restore_latest_checkpoint(trainer, run.checkpoints(), warnings);
      return {std::move(trainer), config, checkpoint.path, device};
    } catch (const NotFound&) {  // its remedy speaks of --resume, which evaluate and predict do not take
      throw NotFound(fmt::format("{}: no intact training checkpoint", run.checkpoints()),
                     "train the run until it saves one, or pass --checkpoint FILE");
    }
  }
  const std::string path = options.checkpoint == "best" ? run.best_checkpoint() : options.checkpoint;
  trainer.restore_checkpoint(path);
  return {std::move(trainer), config, path, device};
}

}  // namespace nimbus::train
