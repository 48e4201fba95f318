// The checks of a whole config's values, after its keys and types (config_schema.cc): every number
// finite, fit's and runtime's ranges, the model's layers (each made from its arguments, their names
// distinct), the optimizer's and the loss's arguments, the metrics' names. parse_config runs it, so
// every reader of a config (nimbus train, evaluate, predict, plan, a dry run) refuses the same
// configs, before anything is written. Each refusal is an InvalidArgument naming where the value was
// written (`train.yaml:12` or `--set KEY=VALUE`), the key, and the remedy.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "config_source.h"

namespace nimbus::train {

// `config`: parsed, defaults filled in.
void validate_config(const nlohmann::json& config, const ConfigSource& source);

// A value as messages show it: its JSON, but .nan, .inf and -.inf as YAML spells them (JSON has no
// words for them and would show null).
std::string as_written(const nlohmann::json& value);

}  // namespace nimbus::train
