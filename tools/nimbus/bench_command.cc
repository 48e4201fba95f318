// nimbus bench: measures this machine's achieved matmul and convolution rates, bandwidth and kernel
// overhead and stores the profile nimbus plan uses for `--local` (docs/planning.md).
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "commands.h"
#include "nimbus/plan/calibration.h"

namespace nimbus::cli {

Command add_bench_command(CLI::App& app) {
  CLI::App* command = app.add_subcommand("bench", "measure this machine for the planner (about ten seconds)");
  auto path = std::make_shared<std::string>();
  command->add_option("--profile", *path, "where to store the profile (default: ~/.cache/nimbus/device-profile.json)");
  return [path] {
    const std::string target = path->empty() ? plan::default_profile_path() : *path;
    plan::prepare_profile_path(target);  // before ten seconds of measuring
    const plan::CalibrationProfile profile = plan::calibrate_cpu();
    plan::save_profile(profile, target);
    std::cout << fmt::format(
        "cpu, {} threads: matmul {:.1f} GFLOP/s (+{:.1f} us per kernel), convolution {:.1f} GFLOP/s (+{:.1f} us), "
        "elementwise {:.1f} GB/s from memory, {:.1f} us per kernel\nprofile written to {}\n",
        profile.threads, profile.matmul_flops / 1e9, profile.matmul_overhead_seconds * 1e6,
        profile.convolution_flops / 1e9, profile.convolution_overhead_seconds * 1e6, profile.bandwidth / 1e9,
        profile.launch_seconds * 1e6, target);
    std::cout << fmt::format(
        "fused elementwise {:.2f} G instructions/s; training steps: {:.0f} us of the trainer's own "
        "work per step, {} ops timed\n",
        profile.vector_flops / 1e9, profile.step_overhead_seconds * 1e6, profile.op_rates.size());
    return 0;
  };
}

}  // namespace nimbus::cli
