// The nimbus subcommands. Each lives in its own <name>_command.cc: add_<name>_command declares
// its options on `app` and returns the function that runs it once the arguments are parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace nimbus::cli {

// Runs a parsed subcommand; returns the process's exit status.
using Command = std::function<int()>;

Command add_data_command(CLI::App& app);
Command add_dmon_command(CLI::App& app);
Command add_doctor_command(CLI::App& app);
Command add_evaluate_command(CLI::App& app);
Command add_generate_command(CLI::App& app);
Command add_info_command(CLI::App& app);
Command add_ops_command(CLI::App& app);
Command add_predict_command(CLI::App& app);
Command add_report_command(CLI::App& app);
Command add_train_command(CLI::App& app, const int& threads);
Command add_bench_command(CLI::App& app);
Command add_plan_command(CLI::App& app);
Command add_k8s_command(CLI::App& app);

}  // namespace nimbus::cli
