// Where mixed precision's step time goes on the CPU: trains a config's model
// (default: the Fashion-MNIST CNN example) under float32, mixed_bfloat16 and
// mixed_float16, first a few warm-up steps, then STEPS steps with an OpProfile,
// and prints per op (fused kernels by program length) the kernel time per step
// under each policy, side by side, with the wall time per step and the
// mixed policies' ratios to float32, by wall time and by the process's CPU
// time (which load from other processes inflates less than wall time). The
// policies alternate round by round so that a change of load hits them alike
// (docs/mixed_precision.md). Later arguments are config overrides, as `--set`.
//
//   bench_mixed_precision [STEPS] [ROUNDS] [CONFIG] [KEY=VALUE ...]
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "nimbus/ops/op_profile.h"
#include "nimbus/train/config.h"

namespace {

constexpr std::array<const char*, 3> kPolicies = {"float32", "mixed_bfloat16", "mixed_float16"};
constexpr int64_t kWarmupSteps = 10;

double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

struct PolicyTotals {
  double wall_seconds = 0;
  double cpu_seconds = 0;
  int64_t steps = 0;
  std::map<std::string, double> op_seconds;  // by "op [kernel]"
};

// Trains `steps` profiled steps (after the warm-up) under `policy` and adds them to `totals`.
void profile_policy(const std::string& config_path, std::vector<std::string> overrides, const char* policy,
                    int64_t steps, PolicyTotals& totals) {
  using namespace nimbus::train;
  overrides.push_back(std::string("runtime.precision=") + policy);
  const nlohmann::json config = load_config(config_path, overrides);
  configure_runtime_from_config(config);
  nimbus::nn::Model model = model_from_train_config(config);
  Trainer trainer = compile_from_config(model, config);
  const auto [x, y] = load_idx_split(config.at("data").at("train"), model, "data.train");
  FitOptions fit{.epochs = 1, .batch_size = config.at("fit").at("batch_size").get<int64_t>(), .verbose = 0};
  fit.steps_per_epoch = kWarmupSteps;
  trainer.fit(x, y, fit);  // traces the step and warms the caches
  fit.steps_per_epoch = steps;
  nimbus::OpProfile profile;
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = process_cpu_seconds();
  trainer.fit(x, y, fit);
  totals.cpu_seconds += process_cpu_seconds() - cpu_start;
  totals.wall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  totals.steps += steps;
  for (const nimbus::OpProfile::Entry& entry : profile.entries()) {
    totals.op_seconds[entry.key + " [" + entry.kernel + "]"] += entry.seconds;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t steps = argc > 1 ? std::atoll(argv[1]) : 60;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 1;
  const std::string config = argc > 3 ? argv[3] : "examples/fashion_mnist_cnn.yaml";
  const std::vector<std::string> overrides(argv + std::min(argc, 4), argv + argc);
  std::array<PolicyTotals, kPolicies.size()> totals;
  for (int round = 0; round < rounds; ++round) {
    for (size_t p = 0; p < kPolicies.size(); ++p) profile_policy(config, overrides, kPolicies[p], steps, totals[p]);
  }

  // Every op any policy ran, by the largest per-step time under any policy.
  std::map<std::string, std::array<double, kPolicies.size()>> per_step;
  for (size_t p = 0; p < kPolicies.size(); ++p) {
    for (const auto& [op, seconds] : totals[p].op_seconds) {
      per_step[op][p] = 1e3 * seconds / static_cast<double>(totals[p].steps);
    }
  }
  std::vector<std::pair<std::string, std::array<double, kPolicies.size()>>> rows(per_step.begin(), per_step.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return *std::max_element(a.second.begin(), a.second.end()) > *std::max_element(b.second.begin(), b.second.end());
  });
  std::printf("%-56s %10s %10s %10s   (kernel ms per step)\n", "op [kernel]", kPolicies[0], kPolicies[1], kPolicies[2]);
  std::array<double, kPolicies.size()> kernel_total{};
  for (const auto& [op, ms] : rows) {
    std::printf("%-56s %10.3f %10.3f %10.3f\n", op.c_str(), ms[0], ms[1], ms[2]);
    for (size_t p = 0; p < kPolicies.size(); ++p) kernel_total[p] += ms[p];
  }
  std::printf("%-56s %10.3f %10.3f %10.3f\n", "all kernels", kernel_total[0], kernel_total[1], kernel_total[2]);
  std::array<double, kPolicies.size()> wall{}, cpu{};
  for (size_t p = 0; p < kPolicies.size(); ++p) {
    wall[p] = 1e3 * totals[p].wall_seconds / static_cast<double>(totals[p].steps);
    cpu[p] = 1e3 * totals[p].cpu_seconds / static_cast<double>(totals[p].steps);
  }
  std::printf("%-56s %10.3f %10.3f %10.3f\n", "wall time per step (ms)", wall[0], wall[1], wall[2]);
  std::printf("%-56s %10.3f %10.3f %10.3f\n", "process CPU time per step (ms)", cpu[0], cpu[1], cpu[2]);
  std::printf("%-56s %10.2f %10.2f %10.2f\n", "wall time vs float32", 1.0, wall[1] / wall[0], wall[2] / wall[0]);
  std::printf("%-56s %10.2f %10.2f %10.2f\n", "CPU time vs float32", 1.0, cpu[1] / cpu[0], cpu[2] / cpu[0]);
  return 0;
}
