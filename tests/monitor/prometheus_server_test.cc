// A real Prometheus server scrapes `nimbus train --metrics-port`: what it stored equals the run's summary.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "nimbus/base/error.h"
#include "nimbus/monitor/exporter.h"
#include "tests/monitor/monitor_test_util.h"

namespace nimbus::monitor {
namespace {

// The value of a one-series instant query's result, or NaN when it is empty.
double query(int port, const std::string& promql) {
  std::string encoded;
  for (char c : promql) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
      encoded += c;
    } else {
      encoded += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  const nlohmann::json answer =
      nlohmann::json::parse(http_get("http://127.0.0.1:" + std::to_string(port) + "/api/v1/query?query=" + encoded));
  EXPECT_EQ(answer.at("status"), "success") << answer.dump();
  const auto& result = answer.at("data").at("result");
  if (result.empty()) return std::nan("");
  return std::stod(result[0].at("value")[1].get<std::string>());
}

TEST(PrometheusServer, ScrapedCountersEqualTheRunSummary) {
  // Skips only on a machine set up by hand without scripts/install-deps, which installs it on every
  // machine that runs the suite (CI included): the skip names the package rather than failing obscurely.
  if (std::system("command -v prometheus > /dev/null") != 0) {
    GTEST_SKIP() << "prometheus not installed (Debian package prometheus; scripts/install-deps installs it)";
  }
  testing::TempDir dir("nimbus-prometheus");
  const int exporter_port = testing::free_port();
  const int prometheus_port = testing::free_port();
  std::ofstream(dir.path() + "/prometheus.yml") << fmt::format(
      "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
      "scrape_configs:\n  - job_name: nimbus\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n",
      exporter_port);
  testing::BackgroundProcess prometheus(
      {"prometheus", "--config.file=" + dir.path() + "/prometheus.yml", "--storage.tsdb.path=" + dir.path() + "/data",
       fmt::format("--web.listen-address=127.0.0.1:{}", prometheus_port)},
      dir.path() + "/prometheus.log");
  ASSERT_TRUE(prometheus.started());
  const std::string ready = fmt::format("http://127.0.0.1:{}/-/ready", prometheus_port);
  bool is_ready = false;
  for (int attempt = 0; attempt < 300 && !is_ready; ++attempt) {
    try {
      http_get(ready);
      is_ready = true;
    } catch (const Unavailable&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ASSERT_TRUE(is_ready) << "prometheus did not start; see its log";

  // Short training (300 steps of the MLP: about a second on a quiet machine) that lingers 8 s, long enough
  // for Prometheus to find the target and scrape it several times, the last ones seeing the final counters.
  const std::string summary_path = dir.path() + "/summary.json";
  const std::string command = fmt::format(
      "{} train examples/fashion_mnist_mlp.yaml --set fit.epochs=1 --set fit.steps_per_epoch=300 --set fit.verbose=0 "
      "--metrics-port {} --metrics-linger 8 --summary {} > {}/train.log 2>&1",
      NIMBUS_CLI, exporter_port, summary_path, dir.path());
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const nlohmann::json summary = nlohmann::json::parse(std::ifstream(summary_path));

  // Once the exporter is gone its series go stale; the largest value stored is the last scraped one.
  const double samples = query(prometheus_port, "max_over_time(nimbus_samples_total[10m])");
  const double input_wait = query(prometheus_port, "max_over_time(nimbus_input_wait_seconds_total[10m])");
  const double scrapes = query(prometheus_port, "count_over_time(nimbus_samples_total[10m])");
  EXPECT_EQ(samples, summary.at("samples_total").get<double>());
  EXPECT_EQ(summary.at("samples_total").get<int64_t>(), 300 * 128);
  const double expected_wait = summary.at("input_wait_seconds_total").get<double>();
  EXPECT_GT(expected_wait, 0);
  EXPECT_NEAR(input_wait, expected_wait, 1e-12 * expected_wait);
  EXPECT_GE(scrapes, 3) << "too few scrapes to trust the comparison";
  // The DCGM series are absent here (no driver); the host ones were scraped.
  EXPECT_GT(query(prometheus_port, "max_over_time(nimbus_host_resident_memory_bytes[10m])"), 0);
}

}  // namespace
}  // namespace nimbus::monitor
