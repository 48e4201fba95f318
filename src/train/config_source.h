// Where each key of a config was written, for messages: `train.yaml:12`, or the `--set KEY=VALUE`
// argument that replaced it. config_schema.cc fills it as it reads; config_validation.cc names it.
#pragma once

#include <map>
#include <string>

namespace nimbus::train {

class ConfigSource {
 public:
  explicit ConfigSource(std::string name) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  // The file's lines by dotted path (YamlDocument::lines).
  void set_lines(std::map<std::string, int> lines) { lines_ = std::move(lines); }
  // `path` (and everything under it) now comes from this --set argument.
  void set_by_override(const std::string& path, const std::string& assignment) { overrides_[path] = assignment; }

  // "--set fit.epochs=-1" when a --set argument gave `path` or a key above it; else "train.yaml:12",
  // the line of `path` or of the nearest key above it that has one; else the file's name.
  std::string where(const std::string& path) const;

 private:
  std::string name_;
  std::map<std::string, int> lines_;
  std::map<std::string, std::string> overrides_;
};

}  // namespace nimbus::train
