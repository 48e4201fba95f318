#include "nimbus/plan/calibration.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "nimbus/base/error.h"
#include "nimbus/device/runtime.h"
#include "nimbus/graph/function.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/nn.h"

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
  std::ranges::nth_element(runs, runs.begin() + static_cast<std::ptrdiff_t>(runs.size() / 2));
  return runs[runs.size() / 2] / kChain;
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

// Additions chained through their output, unfused: each reads two tensors and writes one.
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
  profile.launch_seconds = add_seconds(16);
  const int64_t large = 1024 * 1024;
  profile.bandwidth = rate_beyond(12.0 * large, add_seconds(large), profile.launch_seconds);
  // One addition per 12 bytes moved: elementwise arithmetic is never the bound on a CPU with SIMD, so
  // its rate is taken as the bandwidth's at a generous arithmetic intensity.
  profile.vector_flops = profile.bandwidth / 12 * 16;

  // Matmuls: 8x8 (the fixed cost: primitive dispatch, packing, thread start) and 512x512x512 (the size
  // of a training step's larger matmuls).
  profile.matmul_overhead_seconds = std::max(0.0, matmul_seconds(8) - profile.launch_seconds);
  profile.matmul_flops =
      rate_beyond(2.0 * 512 * 512 * 512, matmul_seconds(512), profile.launch_seconds + profile.matmul_overhead_seconds);

  // 3x3 convolutions, padding same: 1x4x4x8 and 32x28x28x32.
  profile.convolution_overhead_seconds = std::max(0.0, convolution_seconds(1, 4, 8) - profile.launch_seconds);
  profile.convolution_flops = rate_beyond(2.0 * 32 * 28 * 28 * 32 * 32 * 9, convolution_seconds(32, 28, 32),
                                          profile.launch_seconds + profile.convolution_overhead_seconds);
  profile.measured_at = fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::time(nullptr)));
  return profile;
}

nlohmann::json to_json(const CalibrationProfile& p) {
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

void save_profile(const CalibrationProfile& profile, const std::string& path) {
  const std::filesystem::path target(path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path());
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary);
    out << to_json(profile).dump(2) << "\n";
    if (!out) throw NotFound(fmt::format("{}: cannot write the device profile", temporary));
  }
  std::filesystem::rename(temporary, target);
}

CalibrationProfile load_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw NotFound(fmt::format("{}: no device profile", path),
                   "run `nimbus bench` once on this machine to measure it (a few seconds)");
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
