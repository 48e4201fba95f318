#include "config_source.h"

#include <fmt/format.h>

namespace nimbus::train {

namespace {
// The key above `path`: model.layers[1].Dense -> model.layers[1] -> model.layers -> model -> "".
std::string parent_of(const std::string& path) {
  const size_t cut = path.find_last_of(".[");
  return cut == std::string::npos ? "" : path.substr(0, cut);
}
}  // namespace

std::string ConfigSource::where(const std::string& path) const {
  for (std::string key = path; !key.empty(); key = parent_of(key)) {
    if (const auto it = overrides_.find(key); it != overrides_.end()) return "--set " + it->second;
  }
  for (std::string key = path; !key.empty(); key = parent_of(key)) {
    if (const auto it = lines_.find(key); it != lines_.end()) return fmt::format("{}:{}", name_, it->second);
  }
  return name_;
}

}  // namespace nimbus::train
