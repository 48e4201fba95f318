// nimbus doctor RUN_DIR | --url URL: why a run is slow or unhealthy, with evidence and a remedy (docs/monitoring.md).
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "nimbus/base/error.h"
#include "nimbus/monitor/doctor.h"

namespace nimbus::cli {

Command add_doctor_command(CLI::App& app) {
  CLI::App* doctor =
      app.add_subcommand("doctor", "diagnose a run from its run directory or live exporter (docs/monitoring.md)");
  struct Arguments {
    std::string run_dir, url;
  };
  auto arguments = std::make_shared<Arguments>();
  doctor->add_option("run_dir", arguments->run_dir, "a run directory (from nimbus train --run-dir)");
  doctor->add_option("--url", arguments->url, "a live run's exporter, http://HOST:PORT/metrics");
  return [arguments] {
    if (arguments->run_dir.empty() == arguments->url.empty()) {
      throw InvalidArgument("doctor: give a run directory or --url, one of them",
                            "nimbus doctor runs/my-run   or   nimbus doctor --url http://127.0.0.1:9400/metrics");
    }
    const monitor::RunRecord run =
        arguments->url.empty() ? monitor::read_run_dir(arguments->run_dir) : monitor::read_exporter(arguments->url);
    for (const std::string& warning : run.warnings) std::cerr << "nimbus doctor: " << warning << "\n";
    const monitor::Diagnosis diagnosis = monitor::diagnose(run);
    std::cout << "nimbus doctor: " << run.source << "\n" << monitor::format_diagnosis(diagnosis);
    return diagnosis.findings.empty() ? 0 : 2;
  };
}

}  // namespace nimbus::cli
