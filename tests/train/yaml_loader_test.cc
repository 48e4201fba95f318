// The config loader (yaml_loader.h): YAML to JSON with each path's line, and the limits a hostile
// text cannot get past: alias cycles, aliases of aliases, depth, sizes, repeated keys, and yaml-cpp's
// syntax errors in words with a line.
#include "nimbus/train/yaml_loader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "nimbus/base/error.h"

namespace nimbus::testing {
namespace {

using train::load_yaml;
using train::YamlLimits;

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const InvalidArgument& error) {
    return error.message() + " | " + error.hint();
  }
  return "(no error)";
}

// `levels` levels of ten aliases of the level below: 10^levels strings once expanded (nine: a billion).
std::string billion_laughs(int levels = 9) {
  std::string text = "l0: &l0 \"lol\"\n";
  for (int level = 1; level <= levels; ++level) {
    const std::string below = fmt::format("*l{}", level - 1);
    text += fmt::format("l{0}: &l{0} [{1}]\n", level, fmt::join(std::vector<std::string>(10, below), ", "));
  }
  return text;
}

TEST(YamlLoader, ReadsScalarsAsKerasConfigsExpectThemWithEachPathsLine) {
  const train::YamlDocument document = load_yaml(
      "fit:\n  epochs: 3\n  rate: 1e-3\n  name: '12'\n  on: true\n  off: False\n  seed: ~\n"
      "layers:\n  - Dense: {units: 4}\n  - Flatten: {}\nhex: 0x10\nnan: .nan\n",
      "c.yaml");
  const nlohmann::json& v = document.value;
  EXPECT_EQ(v["fit"]["epochs"], 3);
  EXPECT_TRUE(v["fit"]["epochs"].is_number_integer());
  EXPECT_DOUBLE_EQ(v["fit"]["rate"].get<double>(), 1e-3);
  EXPECT_EQ(v["fit"]["name"], "12");  // quoted: a string
  EXPECT_EQ(v["fit"]["on"], true);
  EXPECT_EQ(v["fit"]["off"], false);
  EXPECT_TRUE(v["fit"]["seed"].is_null());
  EXPECT_EQ(v["layers"][0]["Dense"]["units"], 4);
  EXPECT_EQ(v["hex"], 16);
  EXPECT_TRUE(std::isnan(v["nan"].get<double>()));
  EXPECT_EQ(document.lines.at("fit.epochs"), 2);
  EXPECT_EQ(document.lines.at("fit.seed"), 7);
  EXPECT_EQ(document.lines.at("layers[1]"), 10);
  EXPECT_EQ(document.lines.at("layers[0].Dense.units"), 9);
}

TEST(YamlLoader, ExpandsAliasesIntoCopies) {
  const nlohmann::json v =
      load_yaml("base: &base {units: 4}\nlayers:\n  - Dense: *base\n  - Dense: *base\n", "c.yaml").value;
  EXPECT_EQ(v["layers"][0]["Dense"], v["base"]);
  EXPECT_EQ(v["layers"][1]["Dense"]["units"], 4);
}

TEST(YamlLoader, RefusesAnAliasInsideItsOwnAnchor) {
  const std::string block = error_of([] { load_yaml("a: &a\n  b: *a\n", "self.yaml"); });
  EXPECT_NE(block.find("self.yaml:2: the alias *a refers to the node that contains it (&a at line 1)"),
            std::string::npos)
      << block;
  // A one-line text (a --set value) is named without a line.
  const std::string flow = error_of([] { load_yaml("&a [*a]", "--set fit.batch_size=&a [*a]"); });
  EXPECT_NE(flow.find("--set fit.batch_size=&a [*a]: the alias *a"), std::string::npos) << flow;
}

TEST(YamlLoader, StopsABillionLaughsAtTheFirstAliasPastTheLimit) {
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of([] { load_yaml(billion_laughs(), "laughs.yaml"); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(message.find("laughs.yaml:7: the config holds more than 1000000 values once its aliases are expanded"),
            std::string::npos)
      << message;
  // Five levels (about 10^5 values) stay under the limit, and expand.
  const nlohmann::json five = load_yaml(billion_laughs(5), "laughs.yaml").value;
  EXPECT_EQ(five["l5"][9][9][9][9][9], "lol");
}

TEST(YamlLoader, LimitsDepthAliasesIncluded) {
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  EXPECT_NE(error_of([&] { load_yaml(deep, "deep.yaml"); }).find("deep.yaml: mappings and lists nest more than 64"),
            std::string::npos);
  EXPECT_NO_THROW(load_yaml(std::string(63, '[') + std::string(63, ']'), "ok.yaml"));
  // Thousands deep: refused by the loader's limit, never yaml-cpp's "bad file".
  const std::string very_deep = "x: " + std::string(5000, '[') + std::string(5000, ']');
  EXPECT_EQ(error_of([&] { load_yaml(very_deep, "d.yaml"); }).find("bad file"), std::string::npos);
  // Each alias is 3 deep; placed 3 deep, it passes a limit of 6 and not one of 5.
  const std::string nested = "a: &a {b: {c: 1}}\nx: {y: *a}\n";
  EXPECT_NO_THROW(load_yaml(nested, "n.yaml", {.max_depth = 5}));
  EXPECT_NE(error_of([&] { load_yaml(nested, "n.yaml", {.max_depth = 4}); }).find("once this alias is expanded"),
            std::string::npos);
}

TEST(YamlLoader, LimitsTheTextAndEachScalar) {
  EXPECT_NE(error_of([] {
              load_yaml("a: 1\n", "big.yaml", {.max_bytes = 4});
            }).find("big.yaml: 5 bytes; the config loader reads at most 4"),
            std::string::npos);
  const std::string long_value = "a: 1\nb: " + std::string(70000, 'x') + "\n";
  EXPECT_NE(error_of([&] {
              load_yaml(long_value, "long.yaml");
            }).find("long.yaml:2: a value of 70000 bytes; the config loader takes at most 65536"),
            std::string::npos);
}

TEST(YamlLoader, RefusesARepeatedKeyNamingBothLines) {
  const std::string message =
      error_of([] { load_yaml("fit:\n  epochs: 2\n  batch_size: 4\n  epochs: 3\n", "d.yaml"); });
  EXPECT_NE(message.find("d.yaml:4: the key 'fit.epochs' appears twice in one mapping (lines 2 and 4)"),
            std::string::npos)
      << message;
  EXPECT_NE(error_of([] { load_yaml("{a: 1, a: 2}", "flow"); }).find("the key 'a' appears twice"), std::string::npos);
  // The same key in two mappings is two keys.
  EXPECT_NO_THROW(load_yaml("x: {a: 1}\ny: {a: 2}\n", "ok.yaml"));
}

TEST(YamlLoader, NamesSyntaxErrorsInWordsWithTheLine) {
  const std::string unclosed = error_of([] { load_yaml("a: 1\nfit: {epochs: 2\n", "u.yaml"); });
  EXPECT_NE(unclosed.find("u.yaml:"), std::string::npos) << unclosed;
  EXPECT_NE(unclosed.find("not valid YAML: a '{' that is never closed with '}'"), std::string::npos) << unclosed;
  EXPECT_NE(unclosed.find("fix the YAML at that line"), std::string::npos) << unclosed;
  const std::string unknown = error_of([] { load_yaml("a: *nowhere\n", "a.yaml"); });
  EXPECT_NE(unknown.find("an alias (*name) with no anchor (&name) before it"), std::string::npos) << unknown;
  const std::string second = error_of([] { load_yaml("a: 1\n---\nb: 2\n", "two.yaml"); });
  EXPECT_NE(second.find("two.yaml:2: a second YAML document starts here"), std::string::npos) << second;
  const std::string key = error_of([] { load_yaml("? [a, b]\n: 1\n", "k.yaml"); });
  EXPECT_NE(key.find("a mapping's key must be a name"), std::string::npos) << key;
}

TEST(YamlLoader, AnEmptyTextIsNull) {
  EXPECT_TRUE(load_yaml("", "empty.yaml").value.is_null());
  EXPECT_TRUE(load_yaml("# only a comment\n", "empty.yaml").value.is_null());
}

}  // namespace
}  // namespace nimbus::testing
