// nimbus plan CONFIG.yaml --samples N --epochs E [...]: ranked plans, cheapest that meets the
// deadline first, with the reasons and what each optimization is worth (docs/planning.md).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands.h"
#include "flag_checks.h"
#include "nimbus/base/size_units.h"
#include "nimbus/plan/planner.h"
#include "nimbus/plan/train_command.h"
#include "plan_arguments.h"

namespace nimbus::cli {
namespace {

// The plan's nimbus train command line; none for a model given by totals (no config to train).
std::optional<std::vector<std::string>> command_of(const plan::Plan& p, const PlanArguments& arguments) {
  if (arguments.config_path.empty()) return std::nullopt;
  return plan::train_command(p, arguments.config_path, arguments.overrides);
}

nlohmann::json plan_json(const plan::Plan& p, const PlanArguments& arguments) {
  const auto command = command_of(p, arguments);
  return {{"instance", p.instance},
          {"cloud", p.cloud},
          {"region", p.region},
          {"device", p.device},
          {"device_count", p.device_count},
          {"nodes", p.nodes},
          {"precision", plan::precision_name(p.precision)},
          {"micro_batch", p.micro_batch},
          {"gradient_accumulation", p.gradient_accumulation},
          {"step_seconds", p.step.seconds},
          // Where the step's time goes (plan/step_model.h); exposed all-reduce and input overlap the rest.
          {"step_parts",
           {{"compute_seconds", p.step.compute_seconds},
            {"bandwidth_seconds", p.step.bandwidth_seconds},
            {"launch_seconds", p.step.launch_seconds},
            {"host_seconds", p.step.host_seconds},
            {"exposed_allreduce_seconds", p.step.exposed_allreduce_seconds},
            {"input_seconds", p.step.input_seconds}}},
          {"samples_per_sec", p.samples_per_sec},
          {"bottleneck", plan::bottleneck_name(p.step.bottleneck)},
          {"wall_hours", p.wall_hours},
          {"cost_on_demand_usd", p.cost_on_demand_usd},
          {"cost_spot_usd", p.cost_spot_usd},
          {"gpu_utilization", p.step.device_utilization()},
          {"allreduce_seconds", p.step.allreduce_seconds},
          {"memory_bytes", p.memory_bytes},
          {"device_memory_bytes", p.device_memory_bytes},
          {"meets_deadline", p.meets_deadline},
          {"within_budget", p.within_budget},
          {"needs", p.needs},
          {"needs_reason", p.needs_reason},
          {"command", command ? nlohmann::json(*command) : nlohmann::json()}};
}

void print_table(const plan::PlanResult& result, const PlanArguments& arguments, size_t top, std::ostream& out) {
  out << fmt::format("{:>3}  {:<26} {:<6} {:<20} {:<14} {:>11} {:>9} {:>11} {:<16} {:>9} {:>10} {:>10} {:>5}\n", "#",
                     "instance", "cloud", "device", "precision", "micro x acc", "step ms", "samples/s", "bottleneck",
                     "wall", "on-demand", "spot", "util");
  for (size_t i = 0; i < std::min(top, result.plans.size()); ++i) {
    const plan::Plan& p = result.plans[i];
    out << fmt::format(
        "{:>3}  {:<26} {:<6} {:<20} {:<14} {:>11} {:>9.2f} {:>11.0f} {:<16} {:>9} {:>10} {:>10} {:>4.0f}%{}\n", i + 1,
        p.instance, p.cloud, fmt::format("{} x {}", p.device_count, p.device), plan::precision_name(p.precision),
        fmt::format("{} x {}", p.micro_batch, p.gradient_accumulation), p.step.seconds * 1e3, p.samples_per_sec,
        plan::bottleneck_name(p.step.bottleneck), plan::format_hours(p.wall_hours),
        plan::format_dollars(p.cost_on_demand_usd), plan::format_dollars(p.cost_spot_usd),
        100 * p.step.device_utilization(), p.meets_deadline && p.within_budget ? "" : "  (misses deadline or budget)");
    if (!p.needs.empty()) out << fmt::format("     needs: {} ({})\n", fmt::join(p.needs, ", "), p.needs_reason);
    if (const auto command = command_of(p, arguments)) out << "     " << plan::shell_line(*command) << "\n";
  }
}

}  // namespace

Command add_plan_command(CLI::App& app) {
  CLI::App* command =
      app.add_subcommand("plan", "pick the GPU, count, batch and precision for a config and price the run");
  auto arguments = std::make_shared<PlanArguments>();
  arguments->add_to(*command);
  auto json = std::make_shared<bool>(false);
  auto top = std::make_shared<size_t>(10);
  command->add_flag("--json", *json, "print only JSON on stdout ({\"plans\": [...]}, best first); notes on stderr");
  command->add_option("--top", *top, "plans in the table (default 10)")->check(whole_number(1, 1'000'000));
  return [arguments, json, top] {
    const PlanArguments::Resolved resolved = arguments->resolve();
    const plan::PlanResult result =
        plan::make_plans(resolved.workload, resolved.catalog, resolved.request, resolved.unfused);
    for (const std::string& note : result.notes) std::cerr << "note: " << note << "\n";
    if (*json) {
      nlohmann::json out = {{"plans", nlohmann::json::array()}, {"reasons", result.reasons}, {"worth", result.worth}};
      for (const plan::Plan& p : result.plans) out["plans"].push_back(plan_json(p, *arguments));
      std::cout << out.dump(2) << "\n";
      return 0;
    }
    const plan::Workload& work = resolved.workload;
    std::cout << fmt::format(
        "{}: {:.3g} GFLOP per training sample, {} of weights; {} samples x {} epochs, batch {}\n\n", work.name,
        work.flops_per_sample() / 1e9, format_bytes(static_cast<uint64_t>(work.parameter_bytes)),
        resolved.request.samples, resolved.request.epochs, resolved.request.batch_size);
    print_table(result, *arguments, *top, std::cout);
    if (!result.reasons.empty()) std::cout << "\n";
    for (const std::string& line : result.reasons) std::cout << line << "\n";
    if (!result.worth.empty()) std::cout << "\nWhat each optimization is worth on plan 1:\n";
    for (const std::string& line : result.worth) std::cout << "  " << line << "\n";
    return 0;
  };
}

}  // namespace nimbus::cli
