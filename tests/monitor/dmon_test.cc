// nimbus dmon's lines match nvidia-smi dmon's layout; exporter text reads back into its columns.
#include "nimbus/monitor/dmon.h"

#include <gtest/gtest.h>

#include <cmath>

#include "nimbus/base/error.h"
#include "nimbus/monitor/prometheus_text.h"
#include "nimbus/monitor/system_metrics.h"
#include "nimbus/monitor/training_metrics.h"

namespace nimbus::monitor {
namespace {

DeviceReading example_gpu() {
  DeviceReading gpu;
  gpu.index = 0;
  gpu.power_watts = 24.4;
  gpu.gpu_temp_celsius = 46;
  gpu.sm_util_percent = 2;
  gpu.mem_util_percent = 4;
  gpu.enc_util_percent = 0;
  gpu.dec_util_percent = 0;
  gpu.memory_clock_mhz = 810;
  gpu.sm_clock_mhz = 1151;
  gpu.memory_used_bytes = 791.0 * (1 << 20);
  gpu.pcie_rx_bytes_per_second = 14.0 * (1 << 20);
  gpu.pcie_tx_bytes_per_second = 0;
  return gpu;
}

// The layout of nvidia-smi dmon's documented output (../shared/reference/cloud-gpu.md, section 3),
// for the columns Nimbus reads; mtemp is '-' there too.
TEST(Dmon, DefaultOutputMatchesNvidiaSmi) {
  const DmonFormat format(DmonOptions{});
  EXPECT_EQ(format.header(),
            "# gpu   pwr gtemp mtemp    sm   mem   enc   dec  mclk  pclk\n"
            "# Idx     W     C     C     %     %     %     %   MHz   MHz\n");
  const DeviceReading gpu = example_gpu();
  EXPECT_EQ(format.row(&gpu, {}, 0), "    0    24    46     -     2     4     0     0   810  1151\n");
}

TEST(Dmon, DateTimeColumnsMatchNvidiaSmi) {
  const DmonFormat format(DmonOptions{.metrics = "pu", .date = true, .time = true});
  EXPECT_EQ(format.header(),
            "#Date       Time        gpu   pwr gtemp mtemp    sm   mem   enc   dec\n"
            "#YYYYMMDD   HH:MM:SS    Idx     W     C     C     %     %     %     %\n");
  const DeviceReading gpu = example_gpu();
  std::tm when{};
  when.tm_year = 2021 - 1900;
  when.tm_mon = 0;
  when.tm_mday = 2;
  when.tm_hour = 19;
  when.tm_min = 12;
  when.tm_sec = 31;
  when.tm_isdst = -1;
  EXPECT_EQ(format.row(&gpu, {}, std::mktime(&when)),
            " 20210102   19:12:31      0    24    46     -     2     4     0     0\n");
}

TEST(Dmon, GroupsFollowTheOrderOfTheLetters) {
  const DmonFormat format(DmonOptions{.metrics = "cmt", .time = true});
  EXPECT_EQ(format.header(),
            "#Time       gpu  mclk  pclk    fb  bar1 rxpci txpci\n"
            "#HH:MM:SS   Idx   MHz   MHz    MB    MB  MB/s  MB/s\n");
  const DeviceReading gpu = example_gpu();
  const std::string row = format.row(&gpu, {}, 0);
  EXPECT_EQ(row.substr(12), "  0   810  1151   791     -    14     0\n");
}

TEST(Dmon, UnknownGroupIsRefusedWithTheOnesItReads) {
  try {
    DmonFormat format(DmonOptions{.metrics = "pve"});
    FAIL() << "accepted -s pve";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("'v'"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("t (PCIe)"), std::string::npos) << error.what();
  }
}

// Attached to a run: the run's columns come from two scrapes of its exporter.
TEST(Dmon, RunColumnsFromTwoScrapes) {
  MetricRegistry registry;
  TrainingMetrics training(registry, Device::cpu());
  SystemMetrics system(registry);
  system.publish(HostReading{}, {example_gpu()});
  const std::string before = prometheus_text(registry);
  StepRecord step;
  step.end_ns = 40'000'000;  // 40 ms steps, 10 ms of them waiting for input
  step.samples = 100;
  step.spans[Span::kInputWait] = 0.010;
  for (int i = 0; i < 5; ++i) training.on_step(step);
  const ScrapedRun run = read_scrape(prometheus_text(registry), before, 2.0);
  EXPECT_DOUBLE_EQ(run.nimbus.samples_per_second, 250);
  EXPECT_NEAR(run.nimbus.step_milliseconds, 40, 1e-9);
  EXPECT_NEAR(run.nimbus.input_wait_percent, 25, 1e-9);
  ASSERT_EQ(run.devices.size(), 1u);
  EXPECT_EQ(run.devices[0].sm_util_percent, 2);
  EXPECT_NEAR(run.devices[0].memory_used_bytes, 791.0 * (1 << 20), 1);

  const DmonFormat format(DmonOptions{.metrics = "u", .nimbus_columns = true});
  EXPECT_EQ(format.header(),
            "# gpu    sm   mem   enc   dec   sps iwait  step   cpu   rss\n"
            "# Idx     %     %     %     %   1/s     %    ms     %    MB\n");
  EXPECT_EQ(format.row(nullptr, run.nimbus, 0), "    -     -     -     -     -   250    25    40     0     0\n");
}

TEST(PrometheusText, ParsesWhatItWrites) {
  MetricRegistry registry;
  registry.gauge("demo_g", "x", {{"path", "a\"b\\c\nd"}, {"k", "v"}}).set(-2.5);
  registry.histogram("demo_h", "y", {1}).observe(3);
  const std::vector<ParsedSample> samples = parse_prometheus_text(prometheus_text(registry));
  ASSERT_EQ(samples.size(), 5u);
  EXPECT_EQ(samples[0].name, "demo_g");
  EXPECT_EQ(samples[0].label("path"), "a\"b\\c\nd");
  EXPECT_EQ(samples[0].label("k"), "v");
  EXPECT_EQ(samples[0].value, -2.5);
  EXPECT_EQ(samples[2].label("le"), "+Inf");
  EXPECT_EQ(samples[2].value, 1);
  EXPECT_THROW(parse_prometheus_text("demo{a=\"x} 1\n"), DataError);
  EXPECT_THROW(parse_prometheus_text("demo one\n"), DataError);
}

}  // namespace
}  // namespace nimbus::monitor
