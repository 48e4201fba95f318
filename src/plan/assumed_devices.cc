#include "nimbus/plan/assumed_devices.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <regex>

#include "nimbus/base/ascii_case.h"
#include "nimbus/base/error.h"

namespace nimbus::plan {
namespace {

// The catalog names that share the unknown name's family (its part before the first '-': "a100" in
// "A100-90GB"), else every name.
std::vector<std::string> close_names(const Catalog& catalog, const std::string& name) {
  const std::string family = ascii_lower(name.substr(0, name.find('-')));
  std::vector<std::string> close;
  for (const std::string& known : catalog.gpu_names()) {
    if (!family.empty() && ascii_lower(known).starts_with(family)) close.push_back(known);
  }
  return close.empty() ? catalog.gpu_names() : close;
}

}  // namespace

train::AssumedDevices assumed_devices(const Catalog& catalog, const std::string& text) {
  static const std::regex form(
      R"(\s*(?:([0-9]{1,6})\s*(?:x|X|\xC3\x97)\s*)?([0-9]{1,6})\s*(?:x|X|\xC3\x97)\s*(\S+)\s*)");
  std::smatch match;
  if (!std::regex_match(text, match, form)) {
    throw InvalidArgument(fmt::format("--assume-devices '{}' is not COUNTxGPU (or NODESxCOUNTxGPU)", text),
                          "write it as 4xA100-80GB or 1xH100: a count and a GPU of data/catalog/gpus.yaml; "
                          "2x8xH100 for 2 nodes of 8");
  }
  const int nodes = match[1].matched ? std::stoi(match[1]) : 1;
  if (nodes < 1) throw InvalidArgument(fmt::format("--assume-devices '{}': 0 nodes", text), "assume 1 node or more");
  const int count = std::stoi(match[2]);
  if (count < 1 || count > kMaxGpusPerInstance) {
    throw InvalidArgument(fmt::format("--assume-devices '{}': {} GPUs", text, count),
                          fmt::format("assume 1 to {} GPUs (one machine's)", kMaxGpusPerInstance));
  }
  const std::string name = match[3];
  const GpuSpec* gpu = nullptr;
  try {
    gpu = &catalog.gpu(name);
  } catch (const NotFound&) {
    throw NotFound(fmt::format("--assume-devices '{}': unknown GPU '{}'", text, name),
                   fmt::format("close catalog names: {} (data/catalog/gpus.yaml, or --catalog FILE)",
                               fmt::join(close_names(catalog, name), ", ")));
  }
  if (!gpu->supported()) {
    throw Unavailable(fmt::format("--assume-devices '{}': Nimbus's CUDA build does not target {} (compute capability "
                                  "{:.1f}, {})",
                                  text, gpu->name, gpu->compute_capability, gpu->arch),
                      "assume a GPU of compute capability 7.5 or newer");
  }
  return {.nodes = nodes,
          .count = count,
          .name = gpu->name,
          .memory_bytes = static_cast<uint64_t>(gpu->memory_gb * 1e9),
          .compute_capability = gpu->compute_capability,
          .bfloat16 = gpu->tflops.bf16.has_value()};
}

std::string assumed_devices_text(int count, const GpuSpec& gpu) {
  return fmt::format("{}x{}", count, gpu.short_name.empty() ? gpu.name : gpu.short_name);
}

}  // namespace nimbus::plan
