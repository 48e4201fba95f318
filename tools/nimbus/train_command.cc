// nimbus train CONFIG.yaml: trains a model as a YAML config says (docs/training.md).
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "dry_run_report.h"
#include "flag_checks.h"
#include "nimbus/device/device_choice.h"
#include "nimbus/distribute/multi_worker.h"
#include "nimbus/monitor/run_monitor.h"
#include "nimbus/nimbus.h"
#include "nimbus/train/config.h"
#include "nimbus/train/preemption.h"
#include "nimbus/train/run_directory.h"

namespace nimbus::cli {

Command add_train_command(CLI::App& app, const int& threads) {
  CLI::App* train = app.add_subcommand("train", "train a model as a YAML config says (docs/training.md)");
  struct Arguments {
    std::string config_path, summary_path, run_dir, resume_dir, worker_dir, assume_devices, device;
    bool dry_run = false;
    std::vector<std::string> overrides;
    bool overwrite = false;
  };
  auto arguments = std::make_shared<Arguments>();
  train->add_option("config", arguments->config_path, "the YAML config (with --resume: default RUN_DIR/config.json)");
  train->add_option("--set", arguments->overrides,
                    "key.path=value: set a config key (repeatable), e.g. --set fit.epochs=3");
  train->add_option("--device", arguments->device, "where to train, over runtime.device: auto, cpu, cuda or cuda:N")
      ->check(device_name());
  train->add_option("--summary", arguments->summary_path, "also write the run's summary (JSON) to this file")
      ->check(non_empty("a file name"));
  train->add_option("--run-dir", arguments->run_dir, "where the run writes its files (default runs/<date-time>)")
      ->check(non_empty("a folder, or leave the flag out for runs/<date-time>"));
  train
      ->add_option("--resume", arguments->resume_dir,
                   "continue the run in this run directory from its newest intact checkpoint (from step 0 when it "
                   "has none yet and the config is its own)")
      ->check(non_empty("the run directory to continue"));
  train->add_option("--worker-dir", arguments->worker_dir,
                    "multi_worker_mirrored: worker r > 0 writes its own files to DIR/worker-r, not RUN_DIR/worker-r "
                    "(on Kubernetes, a folder of its pod's; rank 0 alone writes the run directory)");
  train->add_flag("--overwrite", arguments->overwrite,
                  "start afresh in a --run-dir that holds a run, moving the old run aside to DIR.replaced-<date-time>");
  train->add_flag("--dry-run", arguments->dry_run,
                  "check everything a run checks before its first step, reading only the data files' headers and "
                  "writing nothing, and say what was checked (docs/planning.md)");
  train->add_option("--assume-devices", arguments->assume_devices,
                    "with --dry-run: check for COUNTxGPU of the planner's catalog instead of this machine's devices, "
                    "e.g. 4xA100-80GB; NODESxCOUNTxGPU for several nodes (multi_worker_mirrored), e.g. 2x8xH100");
  auto monitoring = std::make_shared<monitor::RunMonitorOptions>();
  auto* metrics_port = train->add_option("--metrics-port", monitoring->metrics_port,
                                         "serve Prometheus metrics on this port at /metrics (off unless given)");
  metrics_port->check(port_number(/*zero_picks_a_free_port=*/true));
  train->add_option("--metrics-address", monitoring->metrics_address, "the address /metrics listens on")
      ->capture_default_str()
      ->check(non_empty("an address, e.g. 127.0.0.1 or 0.0.0.0"));
  train
      ->add_option("--metrics-linger", monitoring->metrics_linger_seconds,
                   "seconds to keep serving /metrics after training, for a last scrape")
      ->check(non_negative_real(86400));
  return [arguments, monitoring, &threads] {
    // --threads on the command line wins over runtime.threads in the file.
    if (threads > 0) arguments->overrides.push_back("runtime.threads=" + std::to_string(threads));
    // --device wins over runtime.device; a device this machine or build lacks is refused naming the flag
    // (a dry run on --assume-devices checks it against those instead).
    if (!arguments->device.empty()) {
      if (arguments->assume_devices.empty()) choose_device(arguments->device, "--device", probe_gpus());
      arguments->overrides.push_back("runtime.device=" + arguments->device);
    }
    train::RunOptions options{.run_dir = arguments->run_dir,
                              .start = arguments->overwrite ? train::RunStart::kOverwrite : train::RunStart::kNew,
                              .monitoring = monitoring.get()};
    if (!arguments->resume_dir.empty()) {
      if (arguments->overwrite) {
        throw InvalidArgument(fmt::format("--resume {} and --overwrite: one continues the run, the other replaces it",
                                          arguments->resume_dir),
                              "give one of them");
      }
      if (!arguments->run_dir.empty() && arguments->run_dir != arguments->resume_dir) {
        throw InvalidArgument(fmt::format("--run-dir {} and --resume {} name different folders", arguments->run_dir,
                                          arguments->resume_dir),
                              "a resumed run writes to the folder it resumes");
      }
      options = {.run_dir = arguments->resume_dir, .start = train::RunStart::kResume, .monitoring = monitoring.get()};
      if (arguments->config_path.empty()) arguments->config_path = options.run_dir + "/config.json";
    }
    if (arguments->config_path.empty()) {
      throw InvalidArgument("nimbus train: no config", "nimbus train CONFIG.yaml, or --resume RUN_DIR");
    }
    if (!arguments->assume_devices.empty() && !arguments->dry_run) {
      throw InvalidArgument(fmt::format("--assume-devices {} without --dry-run", arguments->assume_devices),
                            "a run trains on the devices it has; add --dry-run to check for others");
    }
    // A new run inside another run's folders (RUN/checkpoints) would write among that run's files,
    // and --overwrite would move them aside.
    if (options.start != train::RunStart::kResume && !options.run_dir.empty()) {
      train::refuse_output_onto_a_run_file(options.run_dir, "--run-dir");
    }
    if (!arguments->summary_path.empty()) {
      train::refuse_output_onto_a_run_file(arguments->summary_path, "--summary");
      if (!options.run_dir.empty() && train::RunDirectory(options.run_dir).owns(arguments->summary_path)) {
        throw InvalidArgument(fmt::format("--summary {}: that is a file of this run's directory {}",
                                          arguments->summary_path, options.run_dir),
                              "the run writes its summary there as summary.json; give --summary a path outside it");
      }
    }
    const nlohmann::json config = train::load_config(arguments->config_path, arguments->overrides);
    // Under mpirun with multi_worker_mirrored every worker runs this: rank 0 prints, writes the run
    // directory and --summary; worker r writes RUN_DIR/worker-r and serves /metrics on port + r.
    const nlohmann::json strategy = config.at("runtime").value("strategy", nlohmann::json());
    const int worker =
        strategy.is_object() && strategy.value("type", "") == "multi_worker_mirrored" ? distribute::launcher_rank() : 0;
    std::ofstream discarded;  // opened on no file: what the other workers would print goes nowhere
    if (strategy.is_object() && strategy.value("type", "") == "multi_worker_mirrored" && options.run_dir.empty()) {
      throw InvalidArgument("a multi_worker_mirrored run needs --run-dir",
                            "every worker must name the same folder: --run-dir runs/NAME");
    }
    if (worker > 0) {
      options.chief_run_dir = options.run_dir;
      options.run_dir =
          fmt::format("{}/worker-{}", arguments->worker_dir.empty() ? options.run_dir : arguments->worker_dir, worker);
      if (monitoring->metrics_port && *monitoring->metrics_port > 0) *monitoring->metrics_port += worker;
    }
    if (arguments->dry_run) {
      return report_dry_run(config, options, arguments->config_path, arguments->assume_devices, std::cout);
    }
    const nlohmann::json summary = train::run_config(config, worker == 0 ? std::cout : discarded, options);
    if (worker > 0) return 0;
    if (!arguments->summary_path.empty()) {
      std::ofstream out(arguments->summary_path);
      if (!out) throw NotFound(fmt::format("{}: cannot write the summary", arguments->summary_path));
      out << summary.dump(2) << "\n";
    }
    if (train::signal_received() != 0) {
      std::cout << fmt::format("stopped by a signal at step {}; continue with: nimbus train --resume {}\n",
                               summary["steps"].get<int64_t>(), summary["run_dir"].get<std::string>());
      return 0;
    }
    const std::string tokens = summary.contains("tokens_per_sec")
                                   ? fmt::format("  tokens/s: {:.0f}", summary["tokens_per_sec"].get<double>())
                                   : "";
    std::cout << fmt::format("samples/s: {:.0f}{}  final: {}\n", summary["samples_per_sec"].get<double>(), tokens,
                             summary["final"].dump());
    return 0;
  };
}

}  // namespace nimbus::cli
