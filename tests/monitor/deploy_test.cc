// deploy/: the Grafana dashboard has the dashboard schema's shape and queries only series the exporter
// emits (or DCGM's); promtool accepts the Prometheus scrape config.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "nimbus/monitor/host_sampler.h"
#include "nimbus/monitor/system_metrics.h"
#include "nimbus/monitor/training_metrics.h"
#include "tests/support/run_command.h"

namespace nimbus::monitor {
namespace {

// Every series name the exporter can emit: the registry's families (histograms with their suffixes),
// the host series, and the DCGM names device readings produce.
std::set<std::string> emitted_names() {
  MetricRegistry registry;
  TrainingMetrics training(registry, Device::cpu());
  SystemMetrics system(registry);
  HostSampler host;
  system.publish(host.sample(), {});
  std::set<std::string> names(dcgm_metric_names().begin(), dcgm_metric_names().end());
  registry.for_each(
      [&](const MetricRegistry::FamilyView& family) {
        names.insert(family.name);
        if (family.type == MetricType::kHistogram) {
          for (const char* suffix : {"_bucket", "_sum", "_count"}) names.insert(family.name + suffix);
        }
      },
      [](const MetricRegistry::SeriesView&) {});
  return names;
}

// The metric names a PromQL expression reads: identifiers that are not functions, keywords,
// label names in grouping clauses, label matchers, durations or strings.
std::set<std::string> metric_names_in(std::string expr) {
  expr = std::regex_replace(expr, std::regex("\"[^\"]*\""), " ");
  expr = std::regex_replace(expr, std::regex("\\{[^}]*\\}"), " ");
  expr = std::regex_replace(expr, std::regex("\\[[^\\]]*\\]"), " ");
  expr = std::regex_replace(expr, std::regex("\\b(by|without|on|ignoring|group_left|group_right)\\s*\\([^)]*\\)"), " ");
  std::set<std::string> names;
  const std::regex identifier("[a-zA-Z_:][a-zA-Z0-9_:]*(\\s*\\()?");
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), identifier); it != std::sregex_iterator(); ++it) {
    const std::string token = (*it)[0];
    if (token.back() == '(') continue;  // a function or aggregation
    static const std::set<std::string> keywords = {"and", "or", "unless", "bool", "offset", "inf", "nan"};
    if (keywords.count(token)) continue;
    names.insert(token);
  }
  return names;
}

TEST(Deploy, PromqlNameExtraction) {
  EXPECT_EQ(metric_names_in("sum by (le, instance) (rate(nimbus_step_seconds_bucket{job=\"x\"}[1m]))"),
            (std::set<std::string>{"nimbus_step_seconds_bucket"}));
  EXPECT_EQ(metric_names_in("a_total / on (instance) group_left () b_total"),
            (std::set<std::string>{"a_total", "b_total"}));
}

TEST(Deploy, GrafanaDashboardHasTheSchemaShapeAndOnlyEmittedMetrics) {
  std::ifstream in("deploy/grafana/nimbus-dashboard.json");
  ASSERT_TRUE(in) << "deploy/grafana/nimbus-dashboard.json missing";
  const nlohmann::json dashboard = nlohmann::json::parse(in);
  for (const char* key : {"title", "uid", "schemaVersion", "panels", "time", "templating"}) {
    EXPECT_TRUE(dashboard.contains(key)) << key;
  }
  EXPECT_TRUE(dashboard["schemaVersion"].is_number_integer());
  const std::set<std::string> emitted = emitted_names();
  std::set<int> ids;
  std::set<std::string> queried;
  for (const auto& panel : dashboard.at("panels")) {
    EXPECT_TRUE(ids.insert(panel.at("id").get<int>()).second) << "duplicate panel id " << panel["id"];
    EXPECT_EQ(panel.at("type"), "timeseries");
    EXPECT_FALSE(panel.at("title").get<std::string>().empty());
    for (const char* key : {"x", "y", "w", "h"}) EXPECT_TRUE(panel.at("gridPos").at(key).is_number_integer()) << key;
    EXPECT_LE(panel["gridPos"]["x"].get<int>() + panel["gridPos"]["w"].get<int>(), 24) << "Grafana's grid is 24 wide";
    EXPECT_EQ(panel.at("datasource").at("type"), "prometheus");
    ASSERT_FALSE(panel.at("targets").empty()) << panel["title"];
    for (const auto& target : panel["targets"]) {
      for (const std::string& name : metric_names_in(target.at("expr").get<std::string>())) {
        EXPECT_TRUE(emitted.count(name)) << panel["title"] << ": " << name << " is not a series the exporter emits";
        queried.insert(name);
      }
    }
  }
  // The panels: utilization, memory, power, throughput, input wait, step-time breakdown.
  for (const char* name :
       {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE", "nimbus_samples_total",
        "nimbus_input_wait_seconds_total", "nimbus_step_span_seconds_total"}) {
    EXPECT_TRUE(queried.count(name)) << "no panel shows " << name;
  }
}

TEST(Deploy, PromtoolAcceptsTheScrapeConfig) {
  // Skips only on a machine set up by hand without scripts/install-deps, which installs it on every
  // machine that runs the suite (CI included): the skip names the package rather than failing obscurely.
  if (std::system("command -v promtool > /dev/null") != 0) {
    GTEST_SKIP() << "promtool not installed (Debian package prometheus; scripts/install-deps installs it)";
  }
  const std::string output =
      testing::run_command("promtool check config deploy/prometheus/prometheus.yml 2>&1; echo exit=$?");
  EXPECT_NE(output.find("SUCCESS"), std::string::npos) << output;
  EXPECT_NE(output.find("exit=0"), std::string::npos) << output;
}

}  // namespace
}  // namespace nimbus::monitor
