// The arguments nimbus plan and nimbus k8s share: the model (a config, or totals for other
// frameworks), the run (samples, epochs, batch) and the constraints (deadline, budget, GPUs, clouds).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nimbus/plan/catalog.h"
#include "nimbus/plan/planner.h"

namespace nimbus::cli {

struct PlanArguments {
  std::string config_path;
  std::vector<std::string> overrides;
  int64_t samples = 0;
  int epochs = 0;
  int64_t batch_size = 0;
  std::string deadline, budget;
  bool spot = false;
  std::vector<std::string> gpus, clouds, catalogs, precisions;
  bool include_unsupported = false;
  int max_nodes = 1;
  bool local = false;
  std::string profile_path;
  std::string image_capabilities;  // deploy/image.yaml by default (image_capabilities.h)
  double parameters = 0, flops_per_sample = 0;

  // Declares the options on `command`.
  void add_to(CLI::App& command);

  // What the options ask for.
  struct Resolved {
    plan::Catalog catalog;
    plan::Workload workload;
    std::optional<plan::Workload> unfused;
    plan::PlanRequest request;
    std::string config_text;  // the config file as written (k8s ships it)
  };
  Resolved resolve() const;
};

// "6h", "90m", "2d", "1.5" (hours) -> hours.
double parse_hours(const std::string& text);
// "50USD", "$50", "50" -> dollars.
double parse_dollars(const std::string& text);

}  // namespace nimbus::cli
