// nimbus plan: which instance, how many GPUs, what micro-batch and accumulation, which precision, how
// long and at what cost, for a workload (workload.h) and a run of `samples x epochs`.
//
// Every catalog instance the request allows is tried with every precision its device supports; the
// global batch is kept (split evenly over the devices) and the fewest accumulation steps whose
// micro-batch fits the device's memory are chosen, so a batch that cannot fit is never proposed.
// Plans that meet the deadline and budget come first, cheapest first (spot prices with `spot`); plans
// that need what the image lacks (Plan::needs) come last.
//
//   PlanRequest request{.samples = 60000, .epochs = 5, .batch_size = 128};
//   PlanResult result = make_plans(workload, catalog, request);
//   result.plans.front();   // the best plan
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nimbus/plan/catalog.h"
#include "nimbus/plan/device_model.h"
#include "nimbus/plan/image_capabilities.h"
#include "nimbus/plan/step_model.h"
#include "nimbus/plan/workload.h"

namespace nimbus::plan {

// The largest request the planner takes: beyond any real run, and small enough that its integer
// arithmetic (devices over the nodes, a doubled batch, its divisors) cannot overflow or run long.
inline constexpr int kMaxNodes = 1024;
inline constexpr int64_t kMaxBatch = int64_t{1} << 30;
inline constexpr int64_t kMaxSamples = 1'000'000'000'000;  // per epoch
inline constexpr int kMaxEpochs = 1'000'000;

struct PlanRequest {
  int64_t samples = 0;  // per epoch
  int epochs = 1;
  int64_t batch_size = 0;  // the global batch each update sees
  std::optional<double> deadline_hours{};
  std::optional<double> budget_usd{};
  bool spot = false;                  // rank by spot cost
  std::vector<std::string> gpus{};    // only these devices ("T4", "cpu"); empty: every GPU and CPU instances
  std::vector<std::string> clouds{};  // only these clouds; empty: all
  bool include_unsupported = false;   // GPUs the CUDA build (the image's, with `image`) cannot target
  // What the container image's build runs (deploy/image.yaml); none: every GPU from compute capability
  // 7.5 on, and every plan runnable.
  std::optional<ImageCapabilities> image{};
  std::vector<Precision> precisions{Precision::kFloat32, Precision::kMixedBfloat16, Precision::kMixedFloat16};
  int max_nodes = 1;           // instances per plan (multi-node plans run as an MPIJob)
  double memory_margin = 0.9;  // use at most this share of a device's memory
  // The local machine as a free instance ("local"), measured by `nimbus bench`.
  std::optional<CalibrationProfile> local{};
  // Expected spot interruptions per hour and the work each one loses (restart + half a checkpoint
  // interval): the spot cost includes that rework.
  double spot_interruptions_per_hour = 0.05;
  double hours_lost_per_interruption = 0.25;
};

struct Plan {
  std::string cloud, instance, region;
  std::string device;  // catalog short name ("T4") or "cpu"
  bool device_supported = true;
  int nodes = 1;
  int device_count = 1;  // devices over all nodes
  Precision precision = Precision::kFloat32;
  int64_t micro_batch = 0;  // per device
  int64_t gradient_accumulation = 1;
  StepEstimate step{};
  double samples_per_sec = 0;
  double wall_hours = 0;
  double cost_on_demand_usd = 0;
  double cost_spot_usd = 0;
  double memory_bytes = 0;         // predicted per device
  double device_memory_bytes = 0;  // the device's capacity
  double preemption_notice_seconds = 0;
  bool meets_deadline = true;
  bool within_budget = true;
  // Capabilities of deploy/image.yaml the plan needs and the image lacks ("nccl": more than one GPU
  // all-reduce; "mpi": several nodes), and why. Such plans rank last and cannot run yet.
  std::vector<std::string> needs{};
  std::string needs_reason{};

  double cost(bool spot) const { return spot ? cost_spot_usd : cost_on_demand_usd; }
};

struct PlanResult {
  std::vector<Plan> plans;           // best first
  std::vector<std::string> notes;    // what was left out and why, deadline misses
  std::vector<std::string> reasons;  // why the top choices rank as they do
  std::vector<std::string> worth;    // what each optimization is worth on the best plan
};

// "40 s", "12 min", "3.5 h": durations as the plan table and its notes write them.
std::string format_hours(double hours);
// "$12.34", "$0.0021": two decimals from a dollar on, two significant digits below.
std::string format_dollars(double dollars);

// `unfused`: the same workload traced without JIT fusion, for the "JIT fusion" line of `worth`.
PlanResult make_plans(const Workload& work, const Catalog& catalog, const PlanRequest& request,
                      const std::optional<Workload>& unfused = std::nullopt);

}  // namespace nimbus::plan
