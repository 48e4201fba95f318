#include "nimbus/plan/planner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "nimbus/base/ascii_case.h"
#include "nimbus/base/error.h"
#include "nimbus/base/size_units.h"

namespace nimbus::plan {
namespace {

// One way to run: an instance (or the local machine), its device and how its devices talk.
struct Candidate {
  std::string cloud, instance, region;
  DeviceModel device{};
  bool device_supported = true;
  int devices_per_node = 1;
  double intra_node_bytes_per_second = 0;
  double network_bytes_per_second = 0;
  int host_cores_per_device = 1;
  double on_demand_usd_per_hour = 0;
  double spot_usd_per_hour = 0;
  double preemption_notice_seconds = 0;
};

bool wanted(const std::vector<std::string>& filter, const std::string& name) {
  return filter.empty() ||
         std::ranges::any_of(filter, [&](const std::string& f) { return ascii_lower(f) == ascii_lower(name); });
}

// Whether the --gpus filter admits this catalog GPU (by its full or short name) or, for "cpu", a CPU.
bool device_wanted(const std::vector<std::string>& filter, const Catalog& catalog, const InstanceSpec& instance) {
  if (filter.empty()) return true;
  if (instance.gpu.empty()) return wanted(filter, "cpu");
  const GpuSpec& gpu = catalog.gpu(instance.gpu);
  return std::ranges::any_of(filter, [&](const std::string& name) {
    if (ascii_lower(name) == "cpu") return false;
    return &catalog.gpu(name) == &gpu;
  });
}

// The request's counts, each within the planner's limits (planner.h), or InvalidArgument naming it.
void check_request(const PlanRequest& request) {
  const auto check = [](const char* what, int64_t value, int64_t most, const char* remedy) {
    if (value < 1 || value > most) {
      throw InvalidArgument(fmt::format("{} is {}: the planner takes 1 to {}", what, value, most), remedy);
    }
  };
  check("the global batch", request.batch_size, kMaxBatch, "give --batch N, or fit.batch_size in the config");
  check("the number of training samples per epoch", request.samples, kMaxSamples,
        "give --samples N, or a config whose data.train the planner can count");
  check("the number of epochs", request.epochs, kMaxEpochs, "give --epochs N, or fit.epochs in the config");
  check("the largest number of nodes", request.max_nodes, kMaxNodes, "give --max-nodes N");
}

// Whether the image (or, without a record of it, Nimbus's CUDA build) targets the GPU.
bool targeted(const GpuSpec& gpu, const PlanRequest& request) {
  return gpu.supported() && (!request.image || request.image->runs_on(gpu.compute_capability));
}

Candidate candidate_for(const Catalog& catalog, const InstanceSpec& instance, const PlanRequest& request) {
  Candidate c{.cloud = instance.cloud, .instance = instance.name, .region = instance.region};
  if (!instance.gpu.empty() && (instance.gpu_count < 1 || instance.gpu_count > kMaxGpusPerInstance)) {
    throw DataError(fmt::format("instance {} ({}) has {} GPUs: a catalog instance has 1 to {}", instance.name,
                                instance.source, instance.gpu_count, kMaxGpusPerInstance),
                    "fix its gpu_count");
  }
  const int cores = std::max(1, instance.vcpus / 2);
  if (instance.gpu.empty()) {
    c.device = device_model(catalog.cpu(instance.cpu), cores, instance.ram_gb * 1e9);
    c.device.name = "cpu";
    c.host_cores_per_device = cores;
  } else {
    const GpuSpec& gpu = catalog.gpu(instance.gpu);
    c.device = device_model(gpu);
    c.device_supported = targeted(gpu, request);
    c.devices_per_node = instance.gpu_count;
    c.intra_node_bytes_per_second = gpu.nvlink_gbps ? *gpu.nvlink_gbps / 2 * 1e9 : gpu.pcie_gbps * 1e9;
    c.host_cores_per_device = std::max(1, cores / instance.gpu_count);
  }
  c.network_bytes_per_second = instance.network_gbps * 1e9 / 8;
  c.on_demand_usd_per_hour = instance.on_demand_usd_per_hour;
  c.spot_usd_per_hour = catalog.spot_usd_per_hour(instance);
  c.preemption_notice_seconds = catalog.cloud(instance.cloud).preemption_notice_seconds;
  return c;
}

Candidate local_candidate(const CalibrationProfile& profile) {
  return Candidate{.cloud = "local",
                   .instance = "local",
                   .region = "-",
                   .device = device_model(profile),
                   .host_cores_per_device = std::max(1, profile.threads)};
}

// The largest divisor of `n` that `fits`, or nullopt: the micro-batch that needs the fewest accumulation
// steps. Walks the divisors (about sqrt(n) trials), not every accumulation up to n.
std::optional<int64_t> largest_fitting_divisor(int64_t n, const std::function<bool(int64_t)>& fits) {
  std::vector<int64_t> divisors;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    divisors.push_back(d);
    if (d != n / d) divisors.push_back(n / d);
  }
  std::ranges::sort(divisors, std::greater<>());
  for (int64_t divisor : divisors) {
    if (fits(divisor)) return divisor;
  }
  return std::nullopt;
}

// Plan::needs: what the plan's layout needs of the image that its record says it lacks. Gradients
// all-reduced between GPUs go through NCCL, within a process (mirrored) or across them
// (multi_worker_mirrored on GPUs; MPI carries NCCL's id and the barriers).
void mark_needs(Plan& plan, const PlanRequest& request) {
  if (!request.image) return;
  const ImageCapabilities& image = *request.image;
  if (plan.device != "cpu" && plan.device_count > 1 && !image.nccl) {
    plan.needs.emplace_back("nccl");
    plan.needs_reason =
        fmt::format("{} GPUs all-reduce their gradients through NCCL, which the image lacks (nccl: false in {})",
                    plan.device_count, image.source);
  }
  if (plan.nodes > 1 && !image.mpi) {
    plan.needs.emplace_back("mpi");
    if (!plan.needs_reason.empty()) plan.needs_reason += "; ";
    plan.needs_reason +=
        fmt::format("{} nodes meet through MPI, which the image lacks (mpi: false in {})", plan.nodes, image.source);
  }
}

// The plan for one candidate at `nodes` nodes, precision and global batch; nullopt when the batch
// does not split evenly over the devices or no micro-batch fits.
std::optional<Plan> plan_for(const Workload& work, const Candidate& c, int nodes, Precision precision, int64_t batch,
                             const PlanRequest& request) {
  // At most kMaxGpusPerInstance x kMaxNodes (make_plans checks both): no overflow.
  const int devices = c.devices_per_node * nodes;
  if (!c.device.supports(precision) || batch % devices != 0) return std::nullopt;
  const int64_t per_device = batch / devices;
  const double usable = c.device.memory_bytes * request.memory_margin;
  const std::optional<int64_t> micro_batch =
      largest_fitting_divisor(per_device, [&](int64_t micro) { return work.memory_bytes(micro, precision) <= usable; });
  if (!micro_batch) return std::nullopt;
  const int64_t accumulation = per_device / *micro_batch;

  Plan plan{.cloud = c.cloud,
            .instance = c.instance,
            .region = c.region,
            .device = c.device.name,
            .device_supported = c.device_supported,
            .nodes = nodes,
            .device_count = devices,
            .precision = precision,
            .micro_batch = per_device / accumulation,
            .gradient_accumulation = accumulation};
  const double link =
      nodes > 1 ? std::min(c.intra_node_bytes_per_second, c.network_bytes_per_second) : c.intra_node_bytes_per_second;
  plan.step = estimate_step(work, c.device,
                            {.micro_batch = plan.micro_batch,
                             .accumulation = accumulation,
                             .devices = devices,
                             .precision = precision,
                             .link_bytes_per_second = link,
                             .host_cores = c.host_cores_per_device});
  plan.samples_per_sec = static_cast<double>(batch) / plan.step.seconds;
  const double steps = std::ceil(static_cast<double>(request.samples) * request.epochs / static_cast<double>(batch));
  plan.wall_hours = steps * plan.step.seconds / 3600;
  plan.cost_on_demand_usd = plan.wall_hours * c.on_demand_usd_per_hour * nodes;
  const double rework = 1 + request.spot_interruptions_per_hour * request.hours_lost_per_interruption;
  plan.cost_spot_usd = plan.wall_hours * rework * c.spot_usd_per_hour * nodes;
  plan.memory_bytes = work.memory_bytes(plan.micro_batch, precision);
  plan.device_memory_bytes = c.device.memory_bytes;
  plan.preemption_notice_seconds = c.preemption_notice_seconds;
  plan.meets_deadline = !request.deadline_hours || plan.wall_hours <= *request.deadline_hours;
  plan.within_budget = !request.budget_usd || plan.cost(request.spot) <= *request.budget_usd;
  mark_needs(plan, request);
  return plan;
}

// float16 needs loss scaling; where bfloat16 runs as fast it is the better choice, and the same plan twice
// would only crowd the table.
bool dominated(const DeviceModel& device, Precision precision, const PlanRequest& request) {
  return precision == Precision::kMixedFloat16 && device.supports(Precision::kMixedBfloat16) &&
         std::ranges::find(request.precisions, Precision::kMixedBfloat16) != request.precisions.end() &&
         device.matrix_flops.at(Precision::kMixedBfloat16) >= device.matrix_flops.at(Precision::kMixedFloat16);
}

std::string plan_label(const Plan& plan) {
  return fmt::format("{} ({} x {})", plan.instance, plan.device_count, plan.device);
}

// Why the best plan beats the fastest one (or that it is the fastest too).
std::vector<std::string> reasons_for(const std::vector<Plan>& plans, bool spot) {
  if (plans.empty()) return {};
  const Plan& best = plans.front();
  const Plan& fastest = *std::ranges::min_element(plans, {}, &Plan::wall_hours);
  std::vector<std::string> reasons;
  const std::string bound = bottleneck_name(best.step.bottleneck);
  if (&fastest == &best || fastest.device == best.device) {
    reasons.push_back(fmt::format("{} is both the cheapest and the fastest: {} samples/s, bound by {}.",
                                  plan_label(best), static_cast<int64_t>(best.samples_per_sec), bound));
    return reasons;
  }
  const double cheaper = fastest.cost(spot) / std::max(best.cost(spot), 1e-9);
  std::string why;
  switch (best.step.bottleneck) {
    case Bottleneck::kInput:
      why = fmt::format("the model is input-bound at {} samples/s", static_cast<int64_t>(best.samples_per_sec));
      break;
    case Bottleneck::kLaunchOverhead:
      why = "the model is too small to keep a bigger device busy (kernel launches dominate its step)";
      break;
    default:
      why = fmt::format("{} is {:.1f}x faster but costs {:.1f}x more per hour", fastest.device,
                        best.wall_hours / fastest.wall_hours, cheaper * best.wall_hours / fastest.wall_hours);
  }
  reasons.push_back(fmt::format("{} is {:.1f}x cheaper than {} here: {}.", best.device, cheaper, fastest.device, why));
  reasons.push_back(fmt::format("{} finishes in {} instead of {}, for {} more.", plan_label(fastest),
                                format_hours(fastest.wall_hours), format_hours(best.wall_hours),
                                format_dollars(fastest.cost(spot) - best.cost(spot))));
  return reasons;
}

std::string change_line(const std::string& what, const Plan& without, const Plan& with, bool spot) {
  const double saved = without.cost(spot) - with.cost(spot);
  return fmt::format("{}: {} -> {}, {} {} on {} {}", what, format_hours(without.wall_hours),
                     format_hours(with.wall_hours), saved >= 0 ? "saves" : "costs", format_dollars(std::abs(saved)),
                     with.instance, spot ? "spot" : "on-demand");
}

// What mixed precision, JIT fusion, a larger batch and spot are worth on the best plan.
std::vector<std::string> worth_of(const Workload& work, const std::optional<Workload>& unfused, const Candidate& c,
                                  const Plan& best, const PlanRequest& request) {
  std::vector<std::string> lines;
  const int64_t batch = best.micro_batch * best.gradient_accumulation * best.device_count;
  if (best.precision != Precision::kFloat32) {
    if (auto fp32 = plan_for(work, c, best.nodes, Precision::kFloat32, batch, request)) {
      lines.push_back(
          change_line("mixed precision (" + precision_name(best.precision) + ")", *fp32, best, request.spot));
    }
  } else if (const auto mixed = std::ranges::find_if(request.precisions,
                                                     [&](Precision p) {
                                                       return p != Precision::kFloat32 && c.device.supports(p) &&
                                                              !dominated(c.device, p, request);
                                                     });
             mixed == request.precisions.end()) {
    lines.emplace_back(
        fmt::format("mixed precision: {} has no faster reduced-precision unit in the catalog", best.device));
  } else if (auto with_mixed = plan_for(work, c, best.nodes, *mixed, batch, request)) {
    // Ranked below float32 (or level with it): say why it does not pay here.
    lines.push_back(change_line("mixed precision (" + precision_name(*mixed) + ")", best, *with_mixed, request.spot) +
                    fmt::format(" (the step is bound by {})", bottleneck_name(with_mixed->step.bottleneck)));
  }
  if (unfused) {
    if (auto plain = plan_for(*unfused, c, best.nodes, best.precision, batch, request)) {
      lines.push_back(change_line("JIT fusion", *plain, best, request.spot));
    }
  }
  if (auto larger = plan_for(work, c, best.nodes, best.precision, batch * 2, request)) {
    lines.push_back(change_line(fmt::format("batch {} instead of {} (same epochs, fewer updates)", batch * 2, batch),
                                best, *larger, request.spot));
  }
  if (best.cloud != "local") {
    lines.push_back(
        fmt::format("spot: {} -> {} on {}, including the expected rework after interruptions "
                    "(notice: {:.0f} s)",
                    format_dollars(best.cost_on_demand_usd), format_dollars(best.cost_spot_usd), best.instance,
                    best.preemption_notice_seconds));
  }
  return lines;
}

}  // namespace

std::string format_hours(double hours) {
  if (hours < 1.0 / 60) return fmt::format("{:.0f} s", hours * 3600);
  if (hours < 1) return fmt::format("{:.0f} min", hours * 60);
  return fmt::format("{:.1f} h", hours);
}

std::string format_dollars(double dollars) {
  return dollars >= 1 || dollars == 0 ? fmt::format("${:.2f}", dollars) : fmt::format("${:.2g}", dollars);
}

PlanResult make_plans(const Workload& work, const Catalog& catalog, const PlanRequest& request,
                      const std::optional<Workload>& unfused) {
  check_request(request);
  for (const std::string& name : request.gpus) {
    if (ascii_lower(name) != "cpu") catalog.gpu(name);  // an unknown name lists the known ones
  }
  for (const std::string& name : request.clouds) {
    if (ascii_lower(name) != "local") catalog.cloud(name);
  }
  PlanResult result;
  std::vector<Candidate> candidates;
  int unsupported = 0;
  std::vector<std::string> unsupported_gpus;
  for (const InstanceSpec& instance : catalog.instances) {
    if (!wanted(request.clouds, instance.cloud) || !device_wanted(request.gpus, catalog, instance)) continue;
    Candidate c = candidate_for(catalog, instance, request);
    if (!c.device_supported && !request.include_unsupported) {
      ++unsupported;
      const GpuSpec& gpu = catalog.gpu(instance.gpu);
      const std::string name = fmt::format("{} ({:.1f})", c.device.name, gpu.compute_capability);
      if (std::ranges::find(unsupported_gpus, name) == unsupported_gpus.end()) unsupported_gpus.push_back(name);
      continue;
    }
    candidates.push_back(std::move(c));
  }
  if (request.local && wanted(request.gpus, "cpu") && wanted(request.clouds, "local")) {
    candidates.push_back(local_candidate(*request.local));
  }
  if (unsupported > 0 && request.image) {
    result.notes.push_back(
        fmt::format("{} instances left out: the compute capability of their GPUs, {}, is not among the image's "
                    "cuda_architectures [{}] ({}; --include-unsupported shows them)",
                    unsupported, fmt::join(unsupported_gpus, ", "), fmt::join(request.image->cuda_architectures, ", "),
                    request.image->cuda ? request.image->source : request.image->source + " has no CUDA backend"));
  } else if (unsupported > 0) {
    result.notes.push_back(
        fmt::format("{} instances left out: their GPUs ({}) are not targeted by Nimbus's CUDA "
                    "13 build (--include-unsupported shows them)",
                    unsupported, fmt::join(unsupported_gpus, ", ")));
  }

  std::vector<std::pair<Plan, size_t>> ranked;  // plan and its candidate
  int too_big = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    for (int nodes = 1; nodes <= request.max_nodes; nodes *= 2) {
      for (Precision precision : request.precisions) {
        if (!candidates[i].device.supports(precision) || dominated(candidates[i].device, precision, request)) continue;
        if (auto plan = plan_for(work, candidates[i], nodes, precision, request.batch_size, request)) {
          ranked.emplace_back(std::move(*plan), i);
        } else {
          ++too_big;
        }
      }
    }
  }
  if (too_big > 0) {
    result.notes.push_back(
        fmt::format("{} device/precision choices left out: the batch of {} does not split evenly "
                    "over their devices or no micro-batch of it fits their memory",
                    too_big, request.batch_size));
  }
  std::ranges::stable_sort(ranked, [&](const auto& a, const auto& b) {
    if (a.first.needs.empty() != b.first.needs.empty()) return a.first.needs.empty();
    const bool a_ok = a.first.meets_deadline && a.first.within_budget;
    const bool b_ok = b.first.meets_deadline && b.first.within_budget;
    if (a_ok != b_ok) return a_ok;
    if (a.first.cost(request.spot) != b.first.cost(request.spot)) {
      return a.first.cost(request.spot) < b.first.cost(request.spot);
    }
    return a.first.wall_hours < b.first.wall_hours;
  });
  for (const auto& [plan, index] : ranked) result.plans.push_back(plan);
  if (result.plans.empty()) {
    result.notes.push_back(fmt::format("no device in the catalog fits a micro-batch of this model ({} per sample)",
                                       format_bytes(static_cast<uint64_t>(work.memory_per_sample_bytes))));
    return result;
  }
  if (request.deadline_hours && !result.plans.front().meets_deadline) {
    const Plan& closest = *std::ranges::min_element(result.plans, {}, &Plan::wall_hours);
    result.notes.push_back(fmt::format("no plan meets the deadline of {}; the closest, {}, takes {} ({} over)",
                                       format_hours(*request.deadline_hours), plan_label(closest),
                                       format_hours(closest.wall_hours),
                                       format_hours(closest.wall_hours - *request.deadline_hours)));
  }
  if (request.budget_usd && !result.plans.front().within_budget) {
    const Plan& cheapest =
        *std::ranges::min_element(result.plans, {}, [&](const Plan& p) { return p.cost(request.spot); });
    result.notes.push_back(fmt::format("no plan fits the budget of {}; the cheapest, {}, costs {}",
                                       format_dollars(*request.budget_usd), plan_label(cheapest),
                                       format_dollars(cheapest.cost(request.spot))));
  }
  result.reasons = reasons_for(result.plans, request.spot);
  result.worth = worth_of(work, unfused, candidates[ranked.front().second], result.plans.front(), request);
  return result;
}

}  // namespace nimbus::plan
