// The schema of a training config (config.h shows one), declared once: every key
// `nimbus train` knows, by dotted path, with the type its value must have and its
// default, and the validation built on it. Whatever reads a config (nimbus train,
// evaluate, predict, the planner, a dry run) goes through load_config or parse_config.
//
//   const ConfigKey& key = config_schema().at("fit.batch_size");   // {kIntOrAuto, 32}
//   config_type_name(key.type);                                    // "an integer or auto"
//
// The text is read by the config loader (yaml_loader.h: aliases, depth and sizes
// limited, repeated keys refused). Every key is checked: an unknown key is an
// InvalidArgument naming the file, the line and the closest known key; a value
// of the wrong type names the key, the line and the expected type. Overrides
// ("fit.epochs=3", as `--set`) apply to keys the schema knows, whether or not
// the file has them; the value is parsed as YAML and checked like the file's,
// and errors about it name the `--set` argument. Then the whole config's values
// are validated (src/train/config_validation.h: ranges, NaN, layers, optimizer
// and loss arguments), so every reader refuses the same configs.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nimbus::train {

// What a key's value must be.
enum class ConfigType {
  kInt,
  kIntOrAuto,
  kNumber,
  kNumberOrObject,
  kBool,
  kString,
  kSize,
  kIntList,
  kStringList,
  kStringOrObject,
  kList,
  kObject,
  kFrequency,
  kIntOrAutotune,
  kPatterns,
  kBoolOrString
};

// The type as messages name it: "an integer or auto".
const char* config_type_name(ConfigType type);
// Whether `value` is of `type`.
bool matches(const nlohmann::json& value, ConfigType type);

// clang-tidy flags the implicit special members of a struct holding nlohmann::json, whose moves are noexcept.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct ConfigKey {
  ConfigType type;
  nlohmann::json fallback;  // the default; null: optional without default
};

// Every key the schema knows, by dotted path. Sections (model, compile, data, fit, runtime,
// checkpoint, tensorboard, and the optimizer, loss and data maps) are the prefixes of these.
const std::map<std::string, ConfigKey>& config_schema();

// Reads, applies the overrides, checks, and returns the config as JSON with every default filled in.
nlohmann::json load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The same from YAML text (`source` names it in errors).
nlohmann::json parse_config(const std::string& yaml_text, const std::string& source,
                            const std::vector<std::string>& overrides = {});

}  // namespace nimbus::train
