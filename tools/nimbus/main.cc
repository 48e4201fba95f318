// The nimbus command line: parses arguments and calls the library.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

#include "nimbus/nimbus.h"
#include "nimbus/ops/registry.h"
#include "nimbus/train/config.h"

int main(int argc, char** argv) {
  nimbus::reexec_with_omp_defaults(argc, argv);
  CLI::App app{"Nimbus: train deep-learning models fast and cheap on cloud GPUs"};
  app.set_version_flag("--version", "nimbus 0.1.0");
  app.require_subcommand(1);

  int threads = 0;
  app.add_option("--threads", threads, "compute threads (runtime.threads; 0 = all cores)")
      ->check(CLI::NonNegativeNumber);

  CLI::App* info = app.add_subcommand("info", "show the devices and libraries this build can use");
  CLI::App* ops = app.add_subcommand("ops", "print every op as a Markdown table (docs/ops.md)");
  CLI::App* train = app.add_subcommand("train", "train a model as a YAML config says (docs/training.md)");
  std::string config_path, summary_path;
  std::vector<std::string> overrides;
  train->add_option("config", config_path, "the YAML config")->required();
  train->add_option("--set", overrides, "key.path=value: set a config key (repeatable), e.g. --set fit.epochs=3");
  train->add_option("--summary", summary_path, "write the run's summary (JSON) to this file");

  CLI11_PARSE(app, argc, argv);
  try {
    nimbus::RuntimeOptions options;
    options.threads = threads;
    nimbus::configure_runtime(options);
    if (*ops) std::cout << nimbus::op_list_markdown();
    if (*train) {
      // --threads on the command line wins over runtime.threads in the file.
      if (threads > 0) overrides.push_back("runtime.threads=" + std::to_string(threads));
      const nlohmann::json summary =
          nimbus::train::run_config(nimbus::train::load_config(config_path, overrides), std::cout);
      if (!summary_path.empty()) {
        std::ofstream out(summary_path);
        if (!out) throw nimbus::NotFound(fmt::format("{}: cannot write the summary", summary_path));
        out << summary.dump(2) << "\n";
      }
      std::cout << fmt::format("samples/s: {:.0f}  final: {}\n", summary["samples_per_sec"].get<double>(),
                               summary["final"].dump());
    }
    if (*info) {
      for (nimbus::DeviceType type : {nimbus::DeviceType::kCPU, nimbus::DeviceType::kCUDA}) {
        if (!nimbus::has_backend(type)) {
          std::cout << nimbus::device_type_name(type) << ": not available in this build\n";
          continue;
        }
        nimbus::Backend& backend = nimbus::backend(type);
        for (int i = 0; i < backend.device_count(); ++i) std::cout << backend.describe(i) << "\n";
      }
    }
  } catch (const nimbus::Error& error) {
    std::cerr << "nimbus: " << error_kind_name(error.kind()) << ": " << error.what() << "\n";
    return 1;
  }
  return 0;
}
