// nimbus evaluate RUN_DIR|MODEL: the loss and metrics of a trained model on a data split (docs/training.md).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "model_source_options.h"
#include "nimbus/train/config.h"
#include "nimbus/train/trained_model.h"

namespace nimbus::cli {

Command add_evaluate_command(CLI::App& app) {
  CLI::App* evaluate =
      app.add_subcommand("evaluate", "loss and metrics of a trained model (a run directory or a saved model)");
  auto arguments = std::make_shared<ModelSourceArguments>();
  auto as_json = std::make_shared<bool>(false);
  add_model_source_options(*evaluate, *arguments, /*with_labels=*/true);
  evaluate->add_flag("--json", *as_json, "print the scores as one JSON object");
  return [arguments, as_json] {
    train::TrainedModel trained = load_model_source(*arguments);
    if (!*as_json) std::cout << "device: " << trained.device.to_string() << "\n";
    const nlohmann::json split = data_split(*arguments, trained, /*with_labels=*/true);
    const auto [x, y] = train::load_idx_split(split, trained.trainer.model(), "data");
    // A batch that does not fit the device runs in micro-batches that do; saying so on stdout would break --json.
    const train::Logs scores = trained.trainer.evaluate(
        x, y, {.batch_size = batch_size(*arguments, trained), .output = *as_json ? &std::cerr : &std::cout});
    if (*as_json) {
      std::cout << nlohmann::json(scores).dump() << "\n";
      return 0;
    }
    std::string line;
    for (const std::string& name : trained.trainer.metric_names()) {
      line += fmt::format("{}{}: {:.4f}", line.empty() ? "" : " - ", name, scores.at(name));
    }
    std::cout << fmt::format("{}  ({} samples, weights from {})\n", line, x.dim(0), trained.weights_path);
    return 0;
  };
}

}  // namespace nimbus::cli
