#include "nimbus/plan/calibration.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <ranges>
#include <set>
#include <sstream>
#include <vector>

#include "nimbus/base/error.h"
#include "nimbus/data/idx.h"
#include "nimbus/device/runtime.h"
#include "nimbus/graph/function.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/op_profile.h"
#include "nimbus/plan/config_workload.h"
#include "nimbus/train/config.h"
#include "nimbus/train/input_cost.h"
#include "nimbus/train/memory_check.h"

namespace nimbus::plan {
namespace {

// Kernels per timed graph: enough that one run takes milliseconds, so the clock's resolution and the
// graph's own start-up vanish.
constexpr int kChain = 16;

// A chain's tracing options: graph mode, with or without elementwise fusion.
FunctionOptions chain_options(std::string name, bool jit) {
  FunctionOptions options;
  options.name = std::move(name);
  options.graph = true;
  options.jit = jit;
  return options;
}

double median(std::vector<double> values) {
  std::ranges::nth_element(values, values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2));
  return values[values.size() / 2];
}

// Median seconds per kernel of a traced chain of kChain kernels.
double seconds_per_kernel(const Function& chain, const std::vector<Tensor>& inputs) {
  chain(inputs);  // trace and warm up
  std::vector<double> runs;
  const auto budget_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(400);
  while (runs.size() < 5 || (runs.size() < 200 && std::chrono::steady_clock::now() < budget_end)) {
    const auto start = std::chrono::steady_clock::now();
    chain(inputs);
    runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return median(std::move(runs)) / kChain;
}

// A kernel's fixed cost is its time on a tiny input; its rate is the work of a large input over the
// time beyond that fixed cost. (Fitting a line through two sizes instead amplifies noise into the
// fixed cost on a loaded machine.)
double rate_beyond(double work, double seconds, double overhead) { return work / std::max(seconds - overhead, 1e-12); }

// Square matmuls chained through their output (nothing to fold or share).
double matmul_seconds(int64_t n) {
  Function chain(
      [](const std::vector<Tensor>& in) {
        Tensor y = in[0];
        for (int i = 0; i < kChain; ++i) y = matmul(y, in[1]);
        return std::vector<Tensor>{y};
      },
      chain_options("calibrate_matmul", true));
  const double scale = 1 / std::sqrt(static_cast<double>(n));
  return seconds_per_kernel(chain, {random_normal({n, n}, 0, 1), random_normal({n, n}, 0, scale)});
}

// 3x3 convolutions, padding same, channels in = out, NHWC, chained.
double convolution_seconds(int64_t batch, int64_t size, int64_t channels) {
  Function chain(
      [](const std::vector<Tensor>& in) {
        Tensor y = in[0];
        for (int i = 0; i < kChain; ++i) y = conv2d(y, in[1], {.padding = "same"});
        return std::vector<Tensor>{y};
      },
      chain_options("calibrate_conv2d", true));
  const double scale = 1 / std::sqrt(9.0 * static_cast<double>(channels));
  return seconds_per_kernel(
      chain, {random_normal({batch, size, size, channels}, 0, 1), random_normal({3, 3, channels, channels}, 0, scale)});
}

// Additions chained through their output, unfused: each reads two tensors and writes one (12 bytes per element).
double add_seconds(int64_t elements) {
  Function chain(
      [](const std::vector<Tensor>& in) {
        Tensor y = in[0];
        for (int i = 0; i < kChain; ++i) y = y + in[1];
        return std::vector<Tensor>{y};
      },
      chain_options("calibrate_add", false));
  return seconds_per_kernel(chain, {random_normal({elements}, 0, 1), random_normal({elements}, 0, 1)});
}

// Two sizes of a kernel that grows with its work: the per-kernel cost that does not (dispatch, waking the
// compute threads) and the rate of the rest. Noise that makes the larger kernel no slower leaves a fixed cost.
OpRate fit_two_sizes(double small_work, double small_seconds, double large_work, double large_seconds) {
  if (large_seconds <= small_seconds) return {.flops_per_second = 1e18, .overhead_seconds = large_seconds};
  const double rate = (large_work - small_work) / (large_seconds - small_seconds);
  return {.flops_per_second = rate, .overhead_seconds = std::max(0.0, small_seconds - small_work / rate)};
}

// Instructions per second of a large fused elementwise kernel: kChain multiplications and additions over
// 1 Mi and 4 Mi elements, in one kernel.
double fused_instructions_per_second() {
  Function chain(
      [](const std::vector<Tensor>& in) {
        Tensor y = in[0];
        for (int i = 0; i < kChain / 2; ++i) y = y * in[1] + in[0];
        return std::vector<Tensor>{y};
      },
      chain_options("calibrate_fused", true));
  const auto seconds = [&](int64_t elements) {
    // seconds_per_kernel divides the one fused kernel's time by kChain, its instructions.
    return seconds_per_kernel(chain, {random_normal({elements}, 0, 1), random_normal({elements}, 0, 1)});
  };
  const int64_t small = int64_t{1} << 20;
  return fit_two_sizes(small, seconds(small), 4.0 * small, seconds(4 * small)).flops_per_second;
}

// The probe: a small CNN (convolutions, pooling, dense layers, Adam) trained on random images by
// `nimbus train`'s own code (train::run_config) at three batch sizes, every kernel timed. At each batch
// two runs of different lengths are subtracted, so loading and tracing cancel and what remains is
// training steps. Each op's seconds per kernel at the three batches, against its cost, give its fixed
// cost and rate as training runs it, a line between each two neighbouring sizes (a kernel's time is
// not one line in its work: with one line through the smallest and largest sizes, the CNN example at
// batch 32, between them, came out 12-31% short); the step time beyond all kernels is the trainer's own.
// Its dense layers end in relu (relu_bias_backward), tanh (whose gradient is a fused elementwise chain) and
// none, and their gradient products run as matmul pairs, so that the ops that training steps run meet
// their own rates here.
constexpr std::array<int64_t, 3> kProbeBatches = {32, 96, 256};
constexpr int kProbeShortSteps = 25;
constexpr int kProbeLongSteps = 125;
constexpr int kProbeRounds = 3;

nlohmann::json probe_config(const std::filesystem::path& dir, int64_t batch, int steps) {
  const nlohmann::json config = {
      {"model",
       {{"name", "calibration_probe"},
        {"input_shape", {16, 16, 1}},
        {"layers",
         {{{"Conv2D", {{"filters", 16}, {"kernel_size", {3, 3}}, {"padding", "same"}, {"activation", "relu"}}}},
          {{"MaxPooling2D", {{"pool_size", {2, 2}}}}},
          {{"Conv2D", {{"filters", 32}, {"kernel_size", {3, 3}}, {"padding", "same"}, {"activation", "relu"}}}},
          {{"MaxPooling2D", {{"pool_size", {2, 2}}}}},
          {{"Flatten", nlohmann::json::object()}},
          {{"Dense", {{"units", 512}, {"activation", "relu"}}}},
          {{"Dense", {{"units", 64}, {"activation", "tanh"}}}},
          {{"Dense", {{"units", 10}}}}}}}},
      {"compile",
       {{"optimizer", "adam"},
        {"loss", {{"name", "sparse_categorical_crossentropy"}, {"from_logits", true}}},
        {"metrics", {"accuracy"}}}},
      {"data", {{"train", {{"images", (dir / "images.idx").string()}, {"labels", (dir / "labels.idx").string()}}}}},
      {"fit", {{"epochs", 1}, {"batch_size", batch}, {"steps_per_epoch", steps}, {"verbose", 0}}},
      {"runtime", {{"threads", compute_threads()}, {"seed", 1}}}};
  // JSON is YAML: parsing fills in every default, as for a config file.
  return train::parse_config(config.dump(), "nimbus bench's probe model");
}

// One op's kernels in a training step: how many, their seconds and their work (graph/cost.h's FLOPs).
struct OpStep {
  double kernels = 0;
  double seconds = 0;
  double work = 0;
};

struct ProbeStep {
  std::map<std::string, OpStep> ops{};  // the vector ops
  double seconds = 0;                   // the whole step
  double kernel_seconds = 0;            // all its kernels
  double input_seconds = 0;             // gathering the batch's rows (train/input_cost.h)
};

struct ProbeRun {
  std::map<std::string, std::pair<int64_t, double>> kernels;  // op: calls, seconds
  double step_seconds = 0;                                    // after the first 20 steps
};

ProbeRun run_probe(const std::filesystem::path& dir, int64_t batch, int steps) {
  ProbeRun run;
  std::ostringstream progress;
  nlohmann::json summary;
  {
    OpProfile profile;
    // A run directory per probe (a run directory holds one run), removed once read.
    const std::filesystem::path run_dir = dir / fmt::format("run-{}-{}", batch, steps);
    summary = train::run_config(probe_config(dir, batch, steps), progress, {.run_dir = run_dir.string()});
    std::filesystem::remove_all(run_dir);
    for (const OpProfile::Entry& entry : profile.entries()) {
      auto& [calls, seconds] = run.kernels[entry.key];
      calls += entry.calls;
      seconds += entry.seconds;
    }
  }
  run.step_seconds = static_cast<double>(batch) / summary.at("samples_per_sec").get<double>();
  return run;
}

ProbeStep probe_step(const std::filesystem::path& dir, int64_t batch) {
  const ProbeRun short_run = run_probe(dir, batch, kProbeShortSteps);
  const ProbeRun long_run = run_probe(dir, batch, kProbeLongSteps);
  const auto steps = static_cast<double>(kProbeLongSteps - kProbeShortSteps);
  ProbeStep step{.seconds = long_run.step_seconds,
                 .input_seconds = train::measure_input_cost(probe_config(dir, batch, 1), batch).seconds_per_sample *
                                  static_cast<double>(batch)};
  for (const graph::NodeCost& node : train::analyze_train_step(probe_config(dir, batch, 1), batch).cost.nodes) {
    if (!node.op.empty()) step.ops[node.key].work += node.flops;
  }
  for (const auto& [key, totals] : long_run.kernels) {
    const auto before = short_run.kernels.contains(key) ? short_run.kernels.at(key) : std::pair<int64_t, double>{};
    double seconds = (totals.second - before.second) / steps;
    // Something else slowed the short run more than the long one (a loaded machine): the long run's mean.
    if (seconds <= 0) seconds = totals.second / static_cast<double>(kProbeLongSteps);
    step.kernel_seconds += seconds;
    if (auto op = step.ops.find(key); op != step.ops.end()) {
      op->second.kernels = static_cast<double>(totals.first - before.first) / steps;
      op->second.seconds = seconds;
    }
  }
  // Each op's kernels together as well ("fused_elementwise" of all lengths): the cost of a kernel whose
  // own key the probe did not meet.
  std::map<std::string, OpStep> by_op;
  for (const auto& [key, op] : step.ops) {
    const size_t bracket = key.find('[');
    if (bracket == std::string::npos) continue;
    OpStep& all = by_op[key.substr(0, bracket)];
    all.kernels += op.kernels;
    all.seconds += op.seconds;
    all.work += op.work;
  }
  step.ops.merge(by_op);
  return step;
}

// Each figure of a batch's step, and of each of its ops, is the median over the rounds.
ProbeStep median_step(const std::vector<ProbeStep>& rounds) {
  const auto median_of = [&](const auto& field) {
    std::vector<double> values;
    for (const ProbeStep& round : rounds) values.push_back(field(round));
    return median(values);
  };
  ProbeStep step{.seconds = median_of([](const ProbeStep& r) { return r.seconds; }),
                 .kernel_seconds = median_of([](const ProbeStep& r) { return r.kernel_seconds; }),
                 .input_seconds = median_of([](const ProbeStep& r) { return r.input_seconds; })};
  for (const std::string& key : rounds.front().ops | std::views::keys) {
    const auto op_median = [&](double OpStep::*field) {
      return median_of([&](const ProbeStep& r) { return r.ops.contains(key) ? r.ops.at(key).*field : 0.0; });
    };
    step.ops[key] = {.kernels = op_median(&OpStep::kernels),
                     .seconds = op_median(&OpStep::seconds),
                     .work = op_median(&OpStep::work)};
  }
  return step;
}

void calibrate_with_probe(CalibrationProfile& profile) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("nimbus-calibration-{}", getpid());
  std::filesystem::create_directories(dir);
  struct RemoveDir {
    std::filesystem::path dir;
    ~RemoveDir() { std::filesystem::remove_all(dir); }
  } remove_dir{dir};
  const int64_t samples = kProbeBatches.back() * kProbeLongSteps;
  data::write_idx((dir / "images.idx").string(), cast(random_uniform({samples, 16, 16}, 0, 256), DType::kU8));
  data::write_idx((dir / "labels.idx").string(), cast(random_uniform({samples}, 0, 10), DType::kU8));

  // Rounds over all batches in turn, so a busy moment of the machine lands on one round of each batch and
  // the median leaves it out (one round's predictions moved by up to 35% from the next's).
  std::vector<std::vector<ProbeStep>> rounds(kProbeBatches.size());
  for (int round = 0; round < kProbeRounds; ++round) {
    for (size_t i = 0; i < kProbeBatches.size(); ++i) rounds[i].push_back(probe_step(dir, kProbeBatches[i]));
  }
  std::vector<ProbeStep> steps;
  for (const std::vector<ProbeStep>& batch_rounds : rounds) steps.push_back(median_step(batch_rounds));
  for (const std::string& op : steps.front().ops | std::views::keys) {
    // (work, seconds) per kernel at each batch where the op ran.
    std::vector<std::pair<double, double>> sizes;
    for (const ProbeStep& step : steps) {
      const auto found = step.ops.find(op);
      if (found == step.ops.end() || found->second.kernels <= 0 || found->second.work <= 0) continue;
      sizes.emplace_back(found->second.work / found->second.kernels, found->second.seconds / found->second.kernels);
    }
    if (sizes.size() < 2) continue;
    std::ranges::sort(sizes);
    if (sizes.back().first <= 1.5 * sizes.front().first) {
      // Kernels whose work does not grow with the batch (the optimizer's update, scalar arithmetic) show
      // one size only: their time is all rate beyond the dispatch cost.
      double work = 0, seconds = 0;
      for (const auto& [size_work, size_seconds] : sizes) {
        work += size_work;
        seconds += size_seconds;
      }
      profile.op_rates[op] = {
          .flops_per_second = rate_beyond(work, seconds, static_cast<double>(sizes.size()) * profile.launch_seconds),
          .overhead_seconds = profile.launch_seconds};
      continue;
    }
    OpRate rate = fit_two_sizes(sizes[0].first, sizes[0].second, sizes[1].first, sizes[1].second);
    for (size_t i = 1; i + 1 < sizes.size(); ++i) {
      const OpRate line = fit_two_sizes(sizes[i].first, sizes[i].second, sizes[i + 1].first, sizes[i + 1].second);
      rate.beyond.push_back({.from_work = sizes[i].first,
                             .flops_per_second = line.flops_per_second,
                             .overhead_seconds = line.overhead_seconds});
    }
    profile.op_rates[op] = rate;
  }
  double beyond_kernels = 0;
  // The batch's gathering is the workload's input term (plan::InputWork), measured for each config.
  for (const ProbeStep& step : steps) beyond_kernels += step.seconds - step.kernel_seconds - step.input_seconds;
  profile.step_overhead_seconds = std::max(0.0, beyond_kernels / static_cast<double>(steps.size()));
}

double physical_memory_bytes() {
  return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
}

}  // namespace

CalibrationProfile calibrate_cpu() {
  CalibrationProfile profile;
  profile.threads = compute_threads();
  profile.memory_bytes = physical_memory_bytes();

  // Elementwise: 16 floats (the launch and dispatch cost alone) and 1 Mi floats, 4 MiB per tensor (as
  // big as a layer's activations at a large batch; within the last-level cache of most servers).
  // Elementwise: 16 floats (the dispatch cost alone); memory bandwidth from additions of 4 Mi and 16 Mi
  // floats (48 and 192 MiB moved, beyond the caches; two sizes, so waking the threads cancels).
  profile.launch_seconds = add_seconds(16);
  const int64_t large = int64_t{1} << 22;
  profile.bandwidth =
      fit_two_sizes(12.0 * large, add_seconds(large), 48.0 * large, add_seconds(4 * large)).flops_per_second;
  profile.vector_flops = fused_instructions_per_second();

  // Matmuls: 8x8 (the fixed cost: primitive dispatch, packing, thread start) and 512x512x512 (the size
  // of a training step's larger matmuls).
  profile.matmul_overhead_seconds = std::max(0.0, matmul_seconds(8) - profile.launch_seconds);
  profile.matmul_flops =
      rate_beyond(2.0 * 512 * 512 * 512, matmul_seconds(512), profile.launch_seconds + profile.matmul_overhead_seconds);

  // 3x3 convolutions, padding same: 1x4x4x8 and 32x28x28x32.
  profile.convolution_overhead_seconds = std::max(0.0, convolution_seconds(1, 4, 8) - profile.launch_seconds);
  profile.convolution_flops = rate_beyond(2.0 * 32 * 28 * 28 * 32 * 32 * 9, convolution_seconds(32, 28, 32),
                                          profile.launch_seconds + profile.convolution_overhead_seconds);
  calibrate_with_probe(profile);
  profile.measured_at = fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::time(nullptr)));
  return profile;
}

nlohmann::json to_json(const CalibrationProfile& p) {
  nlohmann::json op_rates = nlohmann::json::object();
  for (const auto& [op, rate] : p.op_rates) {
    op_rates[op] = {{"flops_per_second", rate.flops_per_second}, {"overhead_seconds", rate.overhead_seconds}};
    for (const OpLine& line : rate.beyond) {
      op_rates[op]["beyond"].push_back({{"from_work", line.from_work},
                                        {"flops_per_second", line.flops_per_second},
                                        {"overhead_seconds", line.overhead_seconds}});
    }
  }
  return {{"device", p.device},
          {"threads", p.threads},
          {"matmul_flops", p.matmul_flops},
          {"matmul_overhead_seconds", p.matmul_overhead_seconds},
          {"convolution_flops", p.convolution_flops},
          {"convolution_overhead_seconds", p.convolution_overhead_seconds},
          {"bandwidth", p.bandwidth},
          {"launch_seconds", p.launch_seconds},
          {"vector_flops", p.vector_flops},
          {"memory_bytes", p.memory_bytes},
          {"op_rates", op_rates},
          {"step_overhead_seconds", p.step_overhead_seconds},
          {"measured_at", p.measured_at}};
}

CalibrationProfile profile_from_json(const nlohmann::json& json, const std::string& source) {
  CalibrationProfile p;
  try {
    p.device = json.at("device").get<std::string>();
    p.threads = json.at("threads").get<int>();
    p.matmul_flops = json.at("matmul_flops").get<double>();
    p.matmul_overhead_seconds = json.at("matmul_overhead_seconds").get<double>();
    p.convolution_flops = json.at("convolution_flops").get<double>();
    p.convolution_overhead_seconds = json.at("convolution_overhead_seconds").get<double>();
    p.bandwidth = json.at("bandwidth").get<double>();
    p.launch_seconds = json.at("launch_seconds").get<double>();
    p.vector_flops = json.at("vector_flops").get<double>();
    p.memory_bytes = json.at("memory_bytes").get<double>();
    for (const auto& [op, rate] : json.at("op_rates").items()) {
      p.op_rates[op] = {.flops_per_second = rate.at("flops_per_second").get<double>(),
                        .overhead_seconds = rate.at("overhead_seconds").get<double>()};
      for (const auto& line : rate.value("beyond", nlohmann::json::array())) {
        p.op_rates[op].beyond.push_back({.from_work = line.at("from_work").get<double>(),
                                         .flops_per_second = line.at("flops_per_second").get<double>(),
                                         .overhead_seconds = line.at("overhead_seconds").get<double>()});
      }
    }
    p.step_overhead_seconds = json.at("step_overhead_seconds").get<double>();
    p.measured_at = json.at("measured_at").get<std::string>();
  } catch (const nlohmann::json::exception& error) {
    throw DataError(fmt::format("{}: not a device profile: {}", source, error.what()),
                    "run `nimbus bench` to measure this machine again");
  }
  return p;
}

std::string default_profile_path() {
  if (const char* path = std::getenv("NIMBUS_PROFILE")) return path;
  if (const char* cache = std::getenv("XDG_CACHE_HOME")) return std::string(cache) + "/nimbus/device-profile.json";
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/nimbus/device-profile.json";
}

void prepare_profile_path(const std::string& path) {
  const std::filesystem::path target(path);
  const std::string remedy = "give --profile a file in a folder you can write (default ~/.cache/nimbus)";
  std::error_code failed;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), failed);
  if (failed) {
    throw NotFound(fmt::format("{}: cannot make its folder ({})", path, failed.message()), remedy);
  }
  if (std::filesystem::is_directory(target)) {
    throw NotFound(fmt::format("'{}' is a folder, not a profile file", path), remedy);
  }
  const std::string probe = path + ".tmp";
  if (!std::ofstream(probe)) throw NotFound(fmt::format("{}: cannot write there", path), remedy);
  std::filesystem::remove(probe, failed);
}

void save_profile(const CalibrationProfile& profile, const std::string& path) {
  prepare_profile_path(path);
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary);
    out << to_json(profile).dump(2) << "\n";
    if (!out) throw NotFound(fmt::format("{}: cannot write the device profile", temporary));
  }
  std::error_code failed;
  std::filesystem::rename(temporary, path, failed);
  if (failed) throw NotFound(fmt::format("{}: cannot write the device profile ({})", path, failed.message()));
}

CalibrationProfile load_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw NotFound(fmt::format("{}: no device profile", path),
                   "run `nimbus bench` once on this machine to measure it (about ten seconds)");
  }
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& error) {
    throw DataError(fmt::format("{}: not valid JSON: {}", path, error.what()), "run `nimbus bench` again");
  }
  return profile_from_json(json, path);
}

}  // namespace nimbus::plan
