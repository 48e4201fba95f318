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
  auto monitoring = std::make_shared<monitor::RunMonitorOptions>();
  auto* metrics_port = train->add_option("--metrics-port", monitoring->metrics_port,
                                         "serve Prometheus metrics on this port at /metrics (off unless given)");
  metrics_port->check(CLI::Range(0, 65535));
  train->add_option("--metrics-address", monitoring->metrics_address, "the address /metrics listens on")
      ->capture_default_str();
  train
      ->add_option("--metrics-linger", monitoring->metrics_linger_seconds,
                   "seconds to keep serving /metrics after training, for a last scrape")
      ->check(CLI::NonNegativeNumber);
  train->add_option("--run-dir", monitoring->run_dir, "record the run (metrics.jsonl, trace.json) in this directory");
  return [arguments, monitoring, &threads] {
    // --threads on the command line wins over runtime.threads in the file.
    if (threads > 0) arguments->overrides.push_back("runtime.threads=" + std::to_string(threads));
    const bool monitored = monitoring->metrics_port || monitoring->run_dir;
    const nlohmann::json summary = train::run_config(train::load_config(arguments->config_path, arguments->overrides),
                                                     std::cout, monitored ? monitoring.get() : nullptr);
    std::vector<std::string> summary_paths = {arguments->summary_path};
    if (monitoring->run_dir) summary_paths.push_back(*monitoring->run_dir + "/summary.json");
    for (const std::string& path : summary_paths) {
      if (path.empty()) continue;
      std::ofstream out(path);
      if (!out) throw NotFound(fmt::format("{}: cannot write the summary", path));
      out << summary.dump(2) << "\n";
    }
    std::cout << fmt::format("samples/s: {:.0f}  final: {}\n", summary["samples_per_sec"].get<double>(),
                             summary["final"].dump());
    return 0;
  };
}

}  // namespace nimbus::cli
