// nimbus report RUN_DIR -o report.html: a self-contained HTML report of a run (docs/monitoring.md).
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "flag_checks.h"
#include "nimbus/base/error.h"
#include "nimbus/monitor/report.h"
#include "nimbus/train/run_directory.h"

namespace nimbus::cli {

Command add_report_command(CLI::App& app) {
  CLI::App* report = app.add_subcommand("report", "write a run's HTML report: doctor findings and plots");
  struct Arguments {
    std::string run_dir, output;
  };
  auto arguments = std::make_shared<Arguments>();
  report->add_option("run_dir", arguments->run_dir, "a run directory (from nimbus train --run-dir)")->required();
  report->add_option("-o,--output", arguments->output, "the HTML file (default RUN_DIR/report.html)")
      ->check(non_empty("a file name, or leave the flag out for RUN_DIR/report.html"));
  return [arguments] {
    const std::string path = arguments->output.empty() ? arguments->run_dir + "/report.html" : arguments->output;
    train::refuse_output_onto_a_run_file(path, "--output");
    const monitor::RunRecord run = monitor::read_run_dir(arguments->run_dir);
    for (const std::string& warning : run.warnings) std::cerr << "nimbus report: " << warning << "\n";
    const std::string html = monitor::render_report(run);
    std::ofstream out(path);
    if (!out) throw NotFound(fmt::format("{}: cannot write the report", path));
    out << html;
    std::cout << "nimbus report: wrote " << path << "\n";
    return 0;
  };
}

}  // namespace nimbus::cli
