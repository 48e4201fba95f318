#include "plan_arguments.h"

#include <fmt/format.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "nimbus/base/error.h"
#include "nimbus/plan/calibration.h"
#include "nimbus/plan/config_workload.h"
#include "nimbus/train/config.h"

namespace nimbus::cli {

void PlanArguments::add_to(CLI::App& command) {
  command.add_option("config", config_path, "the training config (YAML), as nimbus train reads it");
  command.add_option("--set", overrides, "key.path=value: set a config key (repeatable)");
  command.add_option("--samples", samples, "training samples per epoch (default: the config's training set)");
  command.add_option("--epochs", epochs, "epochs (default: the config's fit.epochs)");
  command.add_option("--batch", batch_size, "global batch each update sees (default: the config's fit.batch_size)");
  command.add_option("--deadline", deadline, "finish within this time: 6h, 90m, 2d");
  command.add_option("--budget", budget, "spend at most this: 50USD");
  command.add_flag("--spot", spot, "rank by spot prices (interruptions included)");
  command.add_option("--gpus", gpus, "only these devices: T4,A100-80GB,... ('cpu' for CPU instances)")->delimiter(',');
  command.add_option("--clouds", clouds, "only these clouds: aws,gcp,azure")->delimiter(',');
  command.add_option("--precision", precisions, "only these: float32,mixed_bfloat16,mixed_float16 (default all)")
      ->delimiter(',');
  command.add_option("--catalog", catalogs, "extra catalog files (your GPUs, instances, private prices)");
  command.add_flag("--include-unsupported", include_unsupported, "also GPUs Nimbus's CUDA build cannot target (V100)");
  command.add_option("--max-nodes", max_nodes, "instances per plan (multi-node plans run as an MPIJob)")
      ->check(CLI::PositiveNumber);
  command.add_flag("--local", local, "also plan this machine, as `nimbus bench` measured it");
  command.add_option("--profile", profile_path, "the device profile of `nimbus bench` (default: its cache path)");
  command.add_option("--params", parameters, "model given by totals: trainable parameters (with --flops-per-sample)");
  command.add_option("--flops-per-sample", flops_per_sample, "model given by totals: training FLOPs per sample");
}

double parse_hours(const std::string& text) {
  static const std::regex form(R"(\s*([0-9]*\.?[0-9]+)\s*(h|m|d|min|hours?|days?)?\s*)");
  std::smatch match;
  if (!std::regex_match(text, match, form)) {
    throw InvalidArgument(fmt::format("--deadline '{}' is not a duration", text), "write it as 6h, 90m or 2d");
  }
  const double value = std::stod(match[1]);
  const std::string unit = match[2];
  if (unit.starts_with("m")) return value / 60;
  if (unit.starts_with("d")) return value * 24;
  return value;
}

double parse_dollars(const std::string& text) {
  static const std::regex form(R"(\s*\$?\s*([0-9]*\.?[0-9]+)\s*(USD|usd|\$)?\s*)");
  std::smatch match;
  if (!std::regex_match(text, match, form)) {
    throw InvalidArgument(fmt::format("--budget '{}' is not an amount of US dollars", text), "write it as 50USD");
  }
  return std::stod(match[1]);
}

PlanArguments::Resolved PlanArguments::resolve() const {
  Resolved out;
  std::vector<std::string> files = plan::default_catalog_files();
  files.insert(files.end(), catalogs.begin(), catalogs.end());
  out.catalog = plan::load_catalog(files);

  plan::PlanRequest& request = out.request;
  if (!config_path.empty()) {
    const nlohmann::json config = train::load_config(config_path, overrides);
    std::ifstream in(config_path);
    std::stringstream text;
    text << in.rdbuf();
    out.config_text = text.str();
    out.workload = plan::workload_from_config(config, true);
    out.unfused = plan::workload_from_config(config, false);
    out.workload.input = out.unfused->input = plan::input_work_from_config(config);
    request.epochs = config.at("fit").at("epochs").get<int>();
    if (config.at("fit").at("batch_size").is_number_integer()) {
      request.batch_size = config.at("fit").at("batch_size").get<int64_t>();
    }
    request.samples = plan::training_samples(config);
  } else if (parameters > 0 && flops_per_sample > 0) {
    out.workload = plan::Workload::from_totals({.parameters = parameters, .flops_per_sample = flops_per_sample});
  } else {
    throw InvalidArgument("nimbus plan needs a model",
                          "give a training config (CONFIG.yaml), or --params and --flops-per-sample");
  }
  if (samples > 0) request.samples = samples;
  if (epochs > 0) request.epochs = epochs;
  if (batch_size > 0) request.batch_size = batch_size;
  if (request.samples <= 0) throw InvalidArgument("nimbus plan needs --samples (training samples per epoch)");
  if (request.batch_size <= 0) throw InvalidArgument("nimbus plan needs --batch (the global batch)");
  if (request.epochs <= 0) request.epochs = 1;
  if (!deadline.empty()) request.deadline_hours = parse_hours(deadline);
  if (!budget.empty()) request.budget_usd = parse_dollars(budget);
  request.spot = spot;
  request.gpus = gpus;
  request.clouds = clouds;
  request.include_unsupported = include_unsupported;
  if (!precisions.empty()) {
    request.precisions.clear();
    for (const std::string& name : precisions) request.precisions.push_back(plan::precision_from_name(name));
  }
  request.max_nodes = max_nodes;
  if (local) {
    request.local = plan::load_profile(profile_path.empty() ? plan::default_profile_path() : profile_path);
  }
  return out;
}

}  // namespace nimbus::cli
