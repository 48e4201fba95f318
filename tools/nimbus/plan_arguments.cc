#include "plan_arguments.h"

#include <fmt/format.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "flag_checks.h"
#include "nimbus/base/error.h"
#include "nimbus/plan/calibration.h"
#include "nimbus/plan/config_workload.h"
#include "nimbus/train/config.h"

namespace nimbus::cli {

void PlanArguments::add_to(CLI::App& command) {
  command.add_option("config", config_path, "the training config (YAML), as nimbus train reads it");
  command.add_option("--set", overrides, "key.path=value: set a config key (repeatable)");
  // 0 is no value a user can give (the checks start at 1): it means "not given, the config's".
  command.add_option("--samples", samples, "training samples per epoch (default: the config's training set)")
      ->check(whole_number(1, plan::kMaxSamples));
  command.add_option("--epochs", epochs, "epochs (default: the config's fit.epochs)")
      ->check(whole_number(1, plan::kMaxEpochs));
  command.add_option("--batch", batch_size, "global batch each update sees (default: the config's fit.batch_size)")
      ->check(whole_number(1, plan::kMaxBatch));
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
      ->check(whole_number(1, plan::kMaxNodes));
  command.add_flag("--local", local, "also plan this machine, as `nimbus bench` measured it");
  command.add_option("--profile", profile_path, "the device profile of `nimbus bench` (default: its cache path)");
  command.add_option("--image-capabilities", image_capabilities,
                     "what the container image's nimbus can run (default: the nearest deploy/image.yaml above the "
                     "config or the working directory)");
  command.add_option("--params", parameters, "model given by totals: trainable parameters (with --flops-per-sample)")
      ->check(positive_real(1e15));
  command.add_option("--flops-per-sample", flops_per_sample, "model given by totals: training FLOPs per sample")
      ->check(positive_real(1e21));
}

double parse_hours(const std::string& text) {
  static const std::regex form(R"(\s*([0-9]*\.?[0-9]+)\s*(h|m|d|min|hours?|days?)?\s*)");
  std::smatch match;
  if (!std::regex_match(text, match, form)) {
    throw InvalidArgument(fmt::format("--deadline '{}' is not a duration", text), "write it as 6h, 90m or 2d");
  }
  const double value = std::stod(match[1]);
  if (value <= 0) throw InvalidArgument(fmt::format("--deadline '{}' is no time at all", text), "give a time above 0");
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
  const double dollars = std::stod(match[1]);
  if (dollars <= 0)
    throw InvalidArgument(fmt::format("--budget '{}' is no money at all", text), "give an amount above 0");
  return dollars;
}

PlanArguments::Resolved PlanArguments::resolve() const {
  Resolved out;
  std::vector<std::string> files = plan::default_catalog_files();
  files.insert(files.end(), catalogs.begin(), catalogs.end());
  out.catalog = plan::load_catalog(files);

  plan::PlanRequest& request = out.request;
  const bool totals_given = parameters > 0 || flops_per_sample > 0;
  if (!config_path.empty()) {
    if (totals_given) {
      throw InvalidArgument("--params and --flops-per-sample describe a model without a config, and a config was given",
                            "give CONFIG.yaml or the totals, not both");
    }
    const nlohmann::json config = train::load_config(config_path, overrides);
    std::ifstream in(config_path);
    std::stringstream text;
    text << in.rdbuf();
    out.config_text = text.str();
    out.workload = plan::workload_from_config(config, true);
    out.unfused = plan::workload_from_config(config, false);
    out.workload.input = out.unfused->input = plan::input_work_from_config(config);
    const nlohmann::json& fit = config.at("fit");
    if (fit.at("epochs").is_number_integer()) request.epochs = fit.at("epochs").get<int>();
    if (fit.at("batch_size").is_number_integer()) request.batch_size = fit.at("batch_size").get<int64_t>();
    request.samples = plan::training_samples(config);
  } else if (!overrides.empty()) {
    throw InvalidArgument("--set changes a config, and no config was given", "give CONFIG.yaml, or leave --set out");
  } else if (parameters > 0 && flops_per_sample > 0) {
    out.workload = plan::Workload::from_totals({.parameters = parameters, .flops_per_sample = flops_per_sample});
  } else if (totals_given) {
    throw InvalidArgument(fmt::format("{} needs {} too", parameters > 0 ? "--params" : "--flops-per-sample",
                                      parameters > 0 ? "--flops-per-sample" : "--params"),
                          "a model given by totals needs both: --params N --flops-per-sample F");
  } else {
    throw InvalidArgument("nimbus plan needs a model",
                          "give a training config (CONFIG.yaml), or --params and --flops-per-sample");
  }
  // What the user gave wins over the config; the planner refuses what is still missing or out of range.
  if (samples > 0) request.samples = samples;
  if (epochs > 0) request.epochs = epochs;
  if (batch_size > 0) request.batch_size = batch_size;
  if (request.samples <= 0) {
    throw InvalidArgument("nimbus plan needs --samples (training samples per epoch)",
                          "the config's data.train could not be counted; give --samples N");
  }
  if (request.batch_size <= 0) {
    throw InvalidArgument("nimbus plan needs --batch (the global batch)",
                          "the config's fit.batch_size is not a number; give --batch N");
  }
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
  request.image = plan::load_image_capabilities(
      image_capabilities.empty() ? plan::default_image_capabilities_path(config_path) : image_capabilities);
  if (!profile_path.empty() && !local) {
    throw InvalidArgument("--profile is read only with --local", "add --local to plan this machine too");
  }
  if (local) {
    request.local = plan::load_profile(profile_path.empty() ? plan::default_profile_path() : profile_path);
  }
  return out;
}

}  // namespace nimbus::cli
