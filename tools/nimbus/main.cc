// The nimbus command line: parses arguments and runs the chosen subcommand (commands.h).
#include <CLI/CLI.hpp>
#include <iostream>
#include <map>

#include "commands.h"
#include "flag_checks.h"
#include "nimbus/nimbus.h"

namespace {

// Parses the arguments and runs the chosen subcommand; errors propagate to main.
int run(int argc, char** argv) {
  nimbus::reexec_with_omp_defaults(argc, argv);
  CLI::App app{"Nimbus: train deep-learning models fast and cheap on cloud GPUs"};
  app.set_version_flag("--version", "nimbus 0.1.0");
  app.require_subcommand(1);

  int threads = 0;
  app.add_option("--threads", threads, "compute threads (runtime.threads; 0 = all cores)")
      ->check(nimbus::cli::whole_number(0, 4096));

  // One line per subcommand; each one's options and code live in tools/nimbus/<name>_command.cc.
  // clang-format off
  const std::map<std::string, nimbus::cli::Command> commands = {
      {"data", nimbus::cli::add_data_command(app)},
      {"dmon", nimbus::cli::add_dmon_command(app)},
      {"doctor", nimbus::cli::add_doctor_command(app)},
      {"evaluate", nimbus::cli::add_evaluate_command(app)},
      {"generate", nimbus::cli::add_generate_command(app)},
      {"info", nimbus::cli::add_info_command(app)},
      {"ops", nimbus::cli::add_ops_command(app)},
      {"predict", nimbus::cli::add_predict_command(app)},
      {"report", nimbus::cli::add_report_command(app)},
      {"train", nimbus::cli::add_train_command(app, threads)},
      {"bench", nimbus::cli::add_bench_command(app)},
      {"plan", nimbus::cli::add_plan_command(app)},
      {"k8s", nimbus::cli::add_k8s_command(app)},
  };
  // clang-format on

  CLI11_PARSE(app, argc, argv);
  nimbus::RuntimeOptions options;
  options.threads = threads;
  nimbus::configure_runtime(options);
  return commands.at(app.get_subcommands().front()->get_name())();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const nimbus::Error& error) {
    std::cerr << "nimbus: " << error_kind_name(error.kind()) << ": " << error.what() << "\n";
    return 1;
  } catch (const std::exception& error) {
    // Anything else (out of memory, a library's own exception) still ends with a message, not a crash.
    std::cerr << "nimbus: error: " << error.what() << "\n";
    return 1;
  }
}
