#include "nimbus/monitor/doctor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

namespace nimbus::monitor {

size_t warmup_steps(size_t total_steps) { return std::min<size_t>(20, total_steps / 10); }

namespace {

// Thresholds (docs/monitoring.md, "doctor rules").
constexpr double kInputBoundShare = 0.10;   // input wait above 10% of step time
constexpr double kSaturatedThreads = 0.90;  // pipeline threads busy 90% of the time
constexpr double kIdleDevicePercent = 50;   // device busy under half the time
constexpr double kLaunchBoundStepSeconds = 0.010;
constexpr double kLowMemoryShare = 0.30;         // peak under 30% of the device's memory
constexpr double kLeakMinGrowthBytes = 1 << 20;  // and at least 1 MiB over the run
constexpr double kLeakRisingShare = 0.5;         // rising in at least half the step-to-step changes
constexpr double kLeakFallingShare = 0.1;        // falling in at most a tenth of them
constexpr double kLossScaleDrop = 1024;          // loss scale down 2^10 from its peak
constexpr double kStragglerRatio = 1.2;          // a worker's mean step 20% above the median worker's

std::string percent(double share) { return fmt::format("{:.0f}%", share * 100); }

std::string bytes_text(double bytes) {
  if (std::abs(bytes) >= double(1 << 30)) return fmt::format("{:.2f} GiB", bytes / double(1 << 30));
  if (std::abs(bytes) >= double(1 << 20)) return fmt::format("{:.1f} MiB", bytes / double(1 << 20));
  return fmt::format("{:.0f} KiB", bytes / 1024);
}

std::vector<const StepLine*> measured_steps(const RunRecord& run) {
  std::vector<const StepLine*> steps;
  for (size_t i = warmup_steps(run.steps.size()); i < run.steps.size(); ++i) steps.push_back(&run.steps[i]);
  return steps;
}

// Pipeline worker threads (named by the data layer) and how busy they were, averaged over samples.
struct PipelineLoad {
  double busy_ratio = 0;  // CPU seconds per second, all pipeline threads together
  bool seen = false;
};
PipelineLoad pipeline_load(const RunRecord& run) {
  PipelineLoad load;
  int counted = 0;
  for (const SampleLine& sample : run.samples) {
    double busy = 0;
    bool any = false;
    for (const auto& [name, ratio] : sample.thread_cpu_ratio) {
      if (name.rfind("nimbus-data", 0) == 0 || name.rfind("nimbus-map", 0) == 0) {
        busy += ratio;
        any = true;
      }
    }
    if (!any) continue;
    load.busy_ratio += busy;
    ++counted;
    load.seen = true;
  }
  if (counted > 0) load.busy_ratio /= counted;
  return load;
}

std::optional<double> mean_device_util(const RunRecord& run) {
  double sum = 0;
  int count = 0;
  for (const SampleLine& sample : run.samples) {
    for (const DeviceSample& d : sample.devices) {
      if (d.sm_util_percent) {
        sum += *d.sm_util_percent;
        ++count;
      }
    }
  }
  if (count == 0) return std::nullopt;
  return sum / count;
}

class Doctor {
 public:
  explicit Doctor(const RunRecord& run) : run_(run), steps_(measured_steps(run)) {
    for (const StepLine* step : steps_) {
      if (!step->spans) continue;
      step_seconds_ += step->step_seconds;
      input_wait_ += (*step->spans)[Span::kInputWait];
      ++with_spans_;
    }
  }

  Diagnosis run() {
    input_bound();
    launch_bound();
    memory_growth();
    memory_headroom();
    loss_scale();
    stragglers();
    return std::move(diagnosis_);
  }

 private:
  bool needs(const char* rule, bool has_data, const char* lacking) {
    if (has_data) {
      diagnosis_.rules_checked.emplace_back(rule);
    } else {
      diagnosis_.rules_silent.push_back(fmt::format("{}: {}", rule, lacking));
    }
    return has_data;
  }

  // Input wait over 10% of step time; or the device idle while the pipeline's threads are saturated.
  void input_bound() {
    if (!needs("input_bound", with_spans_ > 0 && step_seconds_ > 0, "no step spans recorded")) return;
    const double share = input_wait_ / step_seconds_;
    const PipelineLoad load = pipeline_load(run_);
    const std::optional<double> util = mean_device_util(run_);
    const bool saturated_while_idle = load.seen && util && *util < kIdleDevicePercent;
    if (share <= kInputBoundShare && !saturated_while_idle) return;
    std::string evidence =
        fmt::format("input wait is {} of step time ({:.1f} ms of a {:.1f} ms step, over {} steps)", percent(share),
                    input_wait_ / with_spans_ * 1e3, step_seconds_ / with_spans_ * 1e3, with_spans_);
    if (load.seen) evidence += fmt::format("; pipeline threads busy {:.2f} cores on average", load.busy_ratio);
    if (util) evidence += fmt::format("; device busy {:.0f}% of the time", *util);
    diagnosis_.findings.push_back(
        {.rule = "input_bound",
         .title = "Input-bound: the step waits for its next batch",
         .evidence = evidence,
         .remedy = "raise the slow map's num_parallel_calls (or use AUTOTUNE), add .prefetch(AUTOTUNE) at the end "
                   "of the pipeline, .cache() what does not change between epochs, and move decoding and "
                   "augmentation off the step's critical path (into parallel maps)"});
  }

  // The device idles although input arrives in time, with short steps: launch or host overhead.
  void launch_bound() {
    const std::optional<double> util = mean_device_util(run_);
    if (!needs("launch_bound", util && with_spans_ > 0, "no device utilization samples (NVML) or step spans")) return;
    const double share = input_wait_ / step_seconds_;
    const double mean_step = step_seconds_ / with_spans_;
    if (*util >= kIdleDevicePercent || share > kInputBoundShare || mean_step > kLaunchBoundStepSeconds) return;
    diagnosis_.findings.push_back(
        {.rule = "launch_bound",
         .title = "Device underused with small steps: launch- or overhead-bound",
         .evidence = fmt::format("device busy {:.0f}% of the time, {:.2f} ms per step, input wait only {}", *util,
                                 mean_step * 1e3, percent(share)),
         .remedy = "raise fit.batch_size (with the learning rate), keep runtime.graph: true and runtime.jit: true "
                   "so that the step runs as one fused graph"});
  }

  // A memory kind whose bytes in use at step end keep rising: something keeps tensors.
  void memory_growth() {
    std::vector<const StepLine*> with_memory;
    for (const StepLine* step : steps_) {
      if (!step->memory_bytes.empty()) with_memory.push_back(step);
    }
    if (!needs("memory_growth", with_memory.size() >= 10, "fewer than 10 step lines with memory by kind")) return;
    for (const auto& [kind, first_bytes] : with_memory.front()->memory_bytes) {
      int rising = 0, falling = 0;
      for (size_t i = 1; i < with_memory.size(); ++i) {
        const double before =
            with_memory[i - 1]->memory_bytes.count(kind) ? with_memory[i - 1]->memory_bytes.at(kind) : 0;
        const double after = with_memory[i]->memory_bytes.count(kind) ? with_memory[i]->memory_bytes.at(kind) : 0;
        rising += after > before;
        falling += after < before;
      }
      const double changes = double(with_memory.size() - 1);
      const double last_bytes =
          with_memory.back()->memory_bytes.count(kind) ? with_memory.back()->memory_bytes.at(kind) : 0;
      const double growth = last_bytes - first_bytes;
      if (growth < kLeakMinGrowthBytes || rising < kLeakRisingShare * changes ||
          falling > kLeakFallingShare * changes) {
        continue;
      }
      diagnosis_.findings.push_back(
          {.rule = "memory_growth",
           .title = fmt::format("Memory leak: '{}' memory grows step over step", kind),
           .evidence = fmt::format("'{}' went from {} to {} over {} steps ({} per step; rising in {} of {} steps)",
                                   kind, bytes_text(first_bytes), bytes_text(last_bytes), with_memory.size(),
                                   bytes_text(growth / changes), rising, with_memory.size() - 1),
           .remedy = "something keeps tensors from every step: look for callbacks or loops that append tensors "
                     "(or their copies) to a list, and keep plain numbers (.item()) instead"});
    }
  }

  // Peak device memory far below the device's capacity: a larger batch fits.
  void memory_headroom() {
    double peak = 0, capacity = 0;
    for (const SampleLine& sample : run_.samples) {
      for (const DeviceSample& d : sample.devices) {
        if (d.memory_used_bytes && d.memory_total_bytes) {
          peak = std::max(peak, *d.memory_used_bytes);
          capacity = std::max(capacity, *d.memory_total_bytes);
        }
      }
    }
    if (!needs("memory_headroom", capacity > 0, "no device memory samples (NVML)")) return;
    if (peak >= kLowMemoryShare * capacity) return;
    diagnosis_.findings.push_back(
        {.rule = "memory_headroom",
         .title = "Device memory far below capacity",
         .evidence =
             fmt::format("peak {} of {} ({})", bytes_text(peak), bytes_text(capacity), percent(peak / capacity)),
         .remedy = "raise fit.batch_size (scaling the learning rate) until the peak nears 80% of the device"});
  }

  // Mixed precision's loss scale falling far from its peak: gradients overflow over and over.
  void loss_scale() {
    double peak = 0, last = 0;
    bool any = false;
    for (const StepLine* step : steps_) {
      if (!step->loss_scale) continue;
      peak = std::max(peak, *step->loss_scale);
      last = *step->loss_scale;
      any = true;
    }
    if (!needs("loss_scale", any, "no loss scale recorded (no mixed precision)")) return;
    if (last >= 1 && last * kLossScaleDrop > peak) return;
    diagnosis_.findings.push_back(
        {.rule = "loss_scale",
         .title = "Loss scale collapsing",
         .evidence = fmt::format("loss scale fell from {:g} to {:g}", peak, last),
         .remedy = "gradients overflow in float16: try mixed_bfloat16, lower the learning rate, or clip gradients"});
  }

  // With several workers, one whose steps take much longer than the others' holds every step back.
  void stragglers() {
    std::map<int, std::pair<double, int>> per_worker;
    for (const StepLine* step : steps_) {
      if (!step->worker) continue;
      per_worker[*step->worker].first += step->step_seconds;
      ++per_worker[*step->worker].second;
    }
    if (!needs("stragglers", per_worker.size() >= 2, "not a multi-worker run")) return;
    std::vector<std::pair<double, int>> means;
    means.reserve(per_worker.size());
    for (const auto& [worker, totals] : per_worker) means.emplace_back(totals.first / totals.second, worker);
    std::sort(means.begin(), means.end());
    const double median = means[(means.size() - 1) / 2].first;  // the lower median: with two workers, the faster
    for (const auto& [mean, worker] : means) {
      if (mean <= kStragglerRatio * median) continue;
      diagnosis_.findings.push_back(
          {.rule = "stragglers",
           .title = fmt::format("Straggler: worker {} is slower than the others", worker),
           .evidence =
               fmt::format("worker {}: {:.1f} ms per step, median worker {:.1f} ms", worker, mean * 1e3, median * 1e3),
           .remedy = "check that worker's node (other jobs, thermal throttling, a slower GPU or network link) "
                     "and its input shard's size"});
    }
  }

  const RunRecord& run_;
  std::vector<const StepLine*> steps_;
  double step_seconds_ = 0, input_wait_ = 0;
  int with_spans_ = 0;
  Diagnosis diagnosis_;
};

}  // namespace

Diagnosis diagnose(const RunRecord& run) { return Doctor(run).run(); }

std::string format_diagnosis(const Diagnosis& diagnosis) {
  std::string out;
  if (diagnosis.findings.empty()) {
    out += "No problem found.\n";
  } else {
    for (const Finding& finding : diagnosis.findings) {
      out += fmt::format("[{}] {}\n  evidence: {}\n  remedy:   {}\n", finding.rule, finding.title, finding.evidence,
                         finding.remedy);
    }
  }
  out += "rules checked: " +
         (diagnosis.rules_checked.empty() ? std::string("none")
                                          : fmt::format("{}", fmt::join(diagnosis.rules_checked, ", "))) +
         "\n";
  for (const std::string& silent : diagnosis.rules_silent) out += "silent (no data): " + silent + "\n";
  return out;
}

}  // namespace nimbus::monitor
