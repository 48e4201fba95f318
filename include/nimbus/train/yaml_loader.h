// YAML text to JSON, for configs: the line each value came from, and limits that a hostile text
// cannot get past. It depends on yaml-cpp, nlohmann-json and base/ only, so a fuzzer links it alone
// (fuzz/config_fuzzer.cc).
//
//   const YamlDocument document = load_yaml(text, "train.yaml");
//   document.value["fit"]["epochs"];        // 3
//   document.lines.at("fit.epochs");        // 12 (1-based; "model.layers[1].Dense.units" for nested keys)
//
// Aliases are expanded (the JSON holds copies), after checks: an alias inside the node its anchor
// names (`a: &a {b: *a}`) is a cycle; the expanded value may hold at most max_nodes values and
// max_depth levels, so nine levels of aliases of aliases (a "billion laughs") stop at the first
// alias past the limit instead of growing without bound. A mapping that repeats a key is refused
// (YAML forbids it; yaml-cpp would keep the last). Every error is an InvalidArgument naming
// `source:line` (only `source` for one-line texts, such as a `--set` value) and the remedy.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace nimbus::train {

// What load_yaml accepts (docs/training.md, "Limits the config loader enforces"). The defaults
// leave room for Keras's to_json() form of large models.
struct YamlLimits {
  size_t max_bytes = size_t{4} << 20;          // the text
  int max_depth = 64;                          // mappings and lists inside one another, aliases expanded
  size_t max_nodes = 1'000'000;                // values (scalars, mappings, lists), aliases expanded
  size_t max_scalar_bytes = size_t{64} << 10;  // one string or number
};

struct YamlDocument {
  nlohmann::json value;              // null for an empty text
  std::map<std::string, int> lines;  // by dotted path ("data.train.images", "model.layers[0]"): 1-based line
};

// Plain scalars resolve as in YAML 1.2's core schema, as Keras configs expect: null (~, null, empty),
// true/True/false/False, integers, floats (.nan and .inf included); quoted ones are strings.
YamlDocument load_yaml(const std::string& text, const std::string& source, const YamlLimits& limits = {});

}  // namespace nimbus::train
