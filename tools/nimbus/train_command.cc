// nimbus train CONFIG.yaml: trains a model as a YAML config says (docs/training.md).
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "nimbus/nimbus.h"
#include "nimbus/train/config.h"

namespace nimbus::cli {

Command add_train_command(CLI::App& app, const int& threads) {
  CLI::App* train = app.add_subcommand("train", "train a model as a YAML config says (docs/training.md)");
  struct Arguments {
    std::string config_path, summary_path;
    std::vector<std::string> overrides;
  };
  auto arguments = std::make_shared<Arguments>();
  train->add_option("config", arguments->config_path, "the YAML config")->required();
  train->add_option("--set", arguments->overrides,
                    "key.path=value: set a config key (repeatable), e.g. --set fit.epochs=3");
  train->add_option("--summary", arguments->summary_path, "write the run's summary (JSON) to this file");
  return [arguments, &threads] {
    // --threads on the command line wins over runtime.threads in the file.
    if (threads > 0) arguments->overrides.push_back("runtime.threads=" + std::to_string(threads));
    const nlohmann::json summary =
        train::run_config(train::load_config(arguments->config_path, arguments->overrides), std::cout);
    if (!arguments->summary_path.empty()) {
      std::ofstream out(arguments->summary_path);
      if (!out) throw NotFound(fmt::format("{}: cannot write the summary", arguments->summary_path));
      out << summary.dump(2) << "\n";
    }
    std::cout << fmt::format("samples/s: {:.0f}  final: {}\n", summary["samples_per_sec"].get<double>(),
                             summary["final"].dump());
    return 0;
  };
}

}  // namespace nimbus::cli
