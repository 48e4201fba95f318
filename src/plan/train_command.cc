#include "nimbus/plan/train_command.h"

#include <fmt/format.h>

namespace nimbus::plan {

std::vector<std::string> train_command(const Plan& plan, const std::string& config_path,
                                       const std::vector<std::string>& overrides) {
  std::vector<std::string> words = {"nimbus", "train", config_path};
  const auto set = [&words](const std::string& assignment) {
    words.emplace_back("--set");
    words.push_back(assignment);
  };
  for (const std::string& assignment : overrides) set(assignment);
  // fit.batch_size is the global batch: each of the device_count replicas takes its share of it.
  set(fmt::format("fit.batch_size={}", plan.micro_batch * plan.gradient_accumulation * plan.device_count));
  set(fmt::format("fit.gradient_accumulation={}", plan.gradient_accumulation));
  set("runtime.precision=" + precision_name(plan.precision));
  set(plan.device == "cpu" ? "runtime.device=cpu" : "runtime.device=cuda");
  if (plan.nodes > 1) {
    set("runtime.strategy.type=multi_worker_mirrored");
  } else if (plan.device != "cpu" && plan.device_count > 1) {
    std::string devices;
    for (int i = 0; i < plan.device_count; ++i) devices += fmt::format("{}cuda:{}", i > 0 ? ", " : "", i);
    set("runtime.strategy.type=mirrored");
    set(fmt::format("runtime.strategy.devices=[{}]", devices));
  }
  return words;
}

std::string shell_line(const std::vector<std::string>& words) {
  std::string line;
  for (const std::string& word : words) {
    if (!line.empty()) line += ' ';
    const bool plain = !word.empty() && word.find_first_not_of(
                                            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789_-./=:,+@%") == std::string::npos;
    if (plain) {
      line += word;
      continue;
    }
    line += '\'';
    for (char c : word) line += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += '\'';
  }
  return line;
}

}  // namespace nimbus::plan
