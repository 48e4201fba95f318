#include "nimbus/plan/train_command.h"

#include <fmt/format.h>

#include <regex>

namespace nimbus::plan {

std::vector<std::string> train_command(const Plan& plan, const std::string& config_path,
                                       const std::vector<std::string>& overrides) {
  std::vector<std::string> words = {"nimbus", "train", config_path, "--device", plan.device == "cpu" ? "cpu" : "cuda"};
  const auto set = [&words](const std::string& assignment) {
    words.emplace_back("--set");
    words.push_back(assignment);
  };
  for (const std::string& assignment : overrides) set(assignment);
  // fit.batch_size is the global batch: each of the device_count replicas takes its share of it.
  set(fmt::format("fit.batch_size={}", plan.micro_batch * plan.gradient_accumulation * plan.device_count));
  set(fmt::format("fit.gradient_accumulation={}", plan.gradient_accumulation));
  set("runtime.precision=" + precision_name(plan.precision));
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

std::string shell_word(const std::string& word) {
  static const std::regex plain("[A-Za-z0-9_./=:,+@%-]+");
  if (std::regex_match(word, plain)) return word;
  std::string quoted = "'";
  for (const char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string shell_line(const std::vector<std::string>& words) {
  std::string line;
  for (const std::string& word : words) line += (line.empty() ? "" : " ") + shell_word(word);
  return line;
}

}  // namespace nimbus::plan
