// The Prometheus text format as the exporter writes it, and promtool's verdict on it.
#include "nimbus/monitor/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "nimbus/base/error.h"
#include "nimbus/data/dataset.h"
#include "nimbus/monitor/pipeline_metrics.h"
#include "nimbus/monitor/system_metrics.h"
#include "nimbus/monitor/training_metrics.h"
#include "tests/monitor/monitor_test_util.h"
#include "tests/support/run_command.h"

namespace nimbus::monitor {
namespace {

TEST(PrometheusText, CounterAndGaugeHaveHelpTypeAndOneLinePerSeries) {
  MetricRegistry registry;
  registry.counter("demo_requests_total", "Requests served.").add(3);
  registry.gauge("demo_temperature_celsius", "Temperature.", {{"room", "a"}}).set(21.5);
  registry.gauge("demo_temperature_celsius", "Temperature.", {{"room", "b"}}).set(-4);
  EXPECT_EQ(prometheus_text(registry),
            "# HELP demo_requests_total Requests served.\n"
            "# TYPE demo_requests_total counter\n"
            "demo_requests_total 3\n"
            "# HELP demo_temperature_celsius Temperature.\n"
            "# TYPE demo_temperature_celsius gauge\n"
            "demo_temperature_celsius{room=\"a\"} 21.5\n"
            "demo_temperature_celsius{room=\"b\"} -4\n");
}

TEST(PrometheusText, HistogramBucketsAreCumulativeAndInfEqualsCount) {
  MetricRegistry registry;
  Histogram& h = registry.histogram("demo_seconds", "Durations.", {0.1, 1}, {{"op", "x"}});
  for (double v : {0.05, 0.1, 0.5, 2.0, 3.0}) h.observe(v);
  EXPECT_EQ(prometheus_text(registry),
            "# HELP demo_seconds Durations.\n"
            "# TYPE demo_seconds histogram\n"
            "demo_seconds_bucket{op=\"x\",le=\"0.1\"} 2\n"  // le is inclusive: 0.1 falls in it
            "demo_seconds_bucket{op=\"x\",le=\"1\"} 3\n"
            "demo_seconds_bucket{op=\"x\",le=\"+Inf\"} 5\n"
            "demo_seconds_sum{op=\"x\"} " +
                format_sample_value(0.05 + 0.1 + 0.5 + 2.0 + 3.0) +
                "\n"
                "demo_seconds_count{op=\"x\"} 5\n");
}

TEST(PrometheusText, EscapesHelpAndLabelValues) {
  EXPECT_EQ(escape_help("a\\b\nc \"q\""), "a\\\\b\\nc \"q\"");
  EXPECT_EQ(escape_label_value("a\\b\nc \"q\""), "a\\\\b\\nc \\\"q\\\"");
  MetricRegistry registry;
  registry.gauge("demo_info", "Line one\nline two.", {{"path", "C:\\x \"y\""}}).set(1);
  EXPECT_EQ(prometheus_text(registry),
            "# HELP demo_info Line one\\nline two.\n"
            "# TYPE demo_info gauge\n"
            "demo_info{path=\"C:\\\\x \\\"y\\\"\"} 1\n");
}

TEST(PrometheusText, SampleValues) {
  EXPECT_EQ(format_sample_value(0), "0");
  EXPECT_EQ(format_sample_value(123456789), "123456789");
  EXPECT_EQ(format_sample_value(0.25), "0.25");
  EXPECT_EQ(format_sample_value(1e300), "1e+300");
  EXPECT_EQ(format_sample_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_sample_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_sample_value(std::nan("")), "NaN");
  // Shortest round trip: the text parses back to the same double.
  const double third = 1.0 / 3;
  EXPECT_EQ(std::stod(format_sample_value(third)), third);
}

TEST(MetricRegistry, RejectsBadNamesAndConflictingDeclarations) {
  MetricRegistry registry;
  EXPECT_THROW(registry.counter("9lives_total", "x"), InvalidArgument);
  EXPECT_THROW(registry.counter("a-b_total", "x"), InvalidArgument);
  EXPECT_THROW(registry.gauge("demo", "x", {{"__reserved", "v"}}), InvalidArgument);
  EXPECT_THROW(registry.gauge("demo", "x", {{"le", "v"}}), InvalidArgument);
  registry.counter("demo_total", "Help.");
  EXPECT_THROW(registry.gauge("demo_total", "Help."), InvalidArgument);
  EXPECT_THROW(registry.counter("demo_total", "Other help."), InvalidArgument);
  EXPECT_THROW(registry.counter("demo_total", "Help.", {{"extra", "label"}}), InvalidArgument);
  EXPECT_THROW(registry.histogram("demo_h", "x", {1, 0.5}), InvalidArgument);
  EXPECT_THROW(registry.counter("demo_total", "Help.").add(-1), InternalError);
}

TEST(MetricRegistry, SameSeriesTwiceIsTheSameObject) {
  MetricRegistry registry;
  Counter& a = registry.counter("demo_total", "Help.", {{"k", "v"}});
  Counter& b = registry.counter("demo_total", "Help.", {{"k", "v"}});
  EXPECT_EQ(&a, &b);
  a.add(2);
  EXPECT_EQ(registry.value("demo_total", {{"k", "v"}}), 2);
  EXPECT_TRUE(std::isnan(registry.value("demo_total", {{"k", "other"}})));
}

// Every counter of a run exists, at zero, before the first step.
TEST(TrainingMetrics, EveryCounterStartsAtZero) {
  MetricRegistry registry;
  TrainingMetrics metrics(registry, Device::cpu());
  const std::string text = prometheus_text(registry);
  for (const char* line : {"nimbus_samples_total 0\n", "nimbus_steps_total 0\n", "nimbus_input_wait_seconds_total 0\n",
                           "nimbus_step_span_seconds_total{span=\"allreduce\"} 0\n", "nimbus_step_seconds_count 0\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << " missing from\n" << text;
  }
}

TEST(TrainingMetrics, StepUpdatesCountersHistogramAndLoss) {
  MetricRegistry registry;
  TrainingMetrics metrics(registry, Device::cpu());
  StepRecord step;
  step.epoch = 2;
  step.start_ns = 0;
  step.end_ns = 30'000'000;  // 30 ms
  step.samples = 64;
  step.loss = 0.75;
  step.spans[Span::kInputWait] = 0.01;
  step.spans[Span::kCompute] = 0.02;
  metrics.on_step(step);
  metrics.on_step(step);
  EXPECT_EQ(registry.value("nimbus_samples_total"), 128);
  EXPECT_EQ(registry.value("nimbus_steps_total"), 2);
  EXPECT_DOUBLE_EQ(registry.value("nimbus_input_wait_seconds_total"), 0.02);
  EXPECT_DOUBLE_EQ(registry.value("nimbus_step_span_seconds_total", {{"span", "compute"}}), 0.04);
  EXPECT_EQ(registry.value("nimbus_loss"), 0.75);
  EXPECT_EQ(registry.value("nimbus_epoch"), 2);
  const std::string text = prometheus_text(registry);
  EXPECT_NE(text.find("nimbus_step_seconds_bucket{le=\"0.025\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("nimbus_step_seconds_bucket{le=\"0.05\"} 2\n"), std::string::npos) << text;
}

// An input pipeline's stage statistics become one series per stage.
TEST(PipelineMetrics, StagesOfARealIteratorBecomeSeries) {
  const data::Dataset dataset =
      data::Dataset::range(100).map([](const data::Element& e) { return e; }, /*num_parallel_calls=*/2).batch(10);
  data::Iterator iterator = dataset.iterator();
  while (iterator.next()) {
  }
  MetricRegistry registry;
  publish_pipeline_stats(registry, iterator.stats_json());
  const std::string text = prometheus_text(registry);
  EXPECT_NE(text.find("nimbus_pipeline_elements_total{stage=\"batch\",depth=\"0\"} 10\n"), std::string::npos) << text;
  EXPECT_NE(text.find("nimbus_pipeline_elements_total{stage=\"map\",depth=\"1\"} 100\n"), std::string::npos) << text;
  EXPECT_NE(text.find("nimbus_pipeline_parallelism{stage=\"map\",depth=\"1\"} 2\n"), std::string::npos) << text;
  // A second reading moves the counters to the new totals, never back.
  publish_pipeline_stats(registry, iterator.stats_json());
  EXPECT_EQ(registry.value("nimbus_pipeline_elements_total", {{"stage", "map"}, {"depth", "1"}}), 100);
  EXPECT_THROW(publish_pipeline_stats(registry, "{\"nodes\":[{\"name\":1}]}"), DataError);
}

// promtool (Prometheus's own checker) accepts the nimbus_ series: format and naming lint.
TEST(PrometheusText, PromtoolAcceptsTheNimbusSeries) {
  // Skips only on a machine set up by hand without scripts/install-deps, which installs it on every
  // machine that runs the suite (CI included): the skip names the package rather than failing obscurely.
  if (std::system("command -v promtool > /dev/null") != 0) {
    GTEST_SKIP() << "promtool not installed (Debian package prometheus; scripts/install-deps installs it)";
  }
  MetricRegistry registry;
  TrainingMetrics training(registry, Device::cpu());
  SystemMetrics system(registry);
  HostSampler host;
  system.publish(host.sample(), {});
  StepRecord step;
  step.end_ns = 1'000'000;
  step.samples = 8;
  training.on_step(step);
  data::Iterator iterator = data::Dataset::range(10).batch(5).iterator();
  while (iterator.next()) {
  }
  publish_pipeline_stats(registry, iterator.stats_json());
  testing::TempDir dir("nimbus-promtool");
  const std::string path = dir.path() + "/metrics.txt";
  std::ofstream(path) << prometheus_text(registry);
  const std::string output = testing::run_command("promtool check metrics < " + path + " 2>&1; echo exit=$?");
  EXPECT_NE(output.find("exit=0"), std::string::npos) << output;
  EXPECT_EQ(output.find("nimbus_"), std::string::npos) << "promtool flags a nimbus_ series:\n" << output;
}

// The DCGM-compatible device series keep DCGM's names and labels; promtool checks the format of a
// device reading's series (its naming lint flags DCGM's uppercase names, as for DCGM's own exporter).
TEST(PrometheusText, DcgmSeriesKeepDcgmNamesAndLabels) {
  MetricRegistry registry;
  SystemMetrics system(registry);
  DeviceReading gpu;
  gpu.index = 0;
  gpu.name = "NVIDIA H100 80GB HBM3";
  gpu.uuid = "GPU-1234";
  gpu.pci_bus_id = "00000000:3B:00.0";
  gpu.sm_util_percent = 87;
  gpu.memory_used_bytes = 1024.0 * 1024 * 1024;
  gpu.memory_total_bytes = 80.0 * 1024 * 1024 * 1024;
  gpu.power_watts = 312.5;
  gpu.energy_millijoules = 5000;
  system.publish(HostReading{}, {gpu});
  const std::string text = prometheus_text(registry);
  const std::string labels =
      "{gpu=\"0\",UUID=\"GPU-1234\",pci_bus_id=\"00000000:3B:00.0\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB "
      "HBM3\",hostname=\"";
  for (const std::string& series :
       {"DCGM_FI_DEV_GPU_UTIL" + labels, "DCGM_FI_DEV_FB_USED" + labels, "DCGM_FI_DEV_POWER_USAGE" + labels}) {
    EXPECT_NE(text.find(series), std::string::npos) << series << " missing from\n" << text;
  }
  EXPECT_NE(text.find("\"} 1024\n"), std::string::npos) << "FB_USED is in MiB:\n" << text;
  EXPECT_NE(text.find("\"} 80896\n"), std::string::npos) << "FB_FREE is in MiB:\n" << text;
  EXPECT_NE(text.find("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"), std::string::npos) << text;
  // Unsupported figures (NaN) are left out rather than exported as NaN.
  EXPECT_EQ(text.find("DCGM_FI_DEV_GPU_TEMP{"), std::string::npos) << text;
}

}  // namespace
}  // namespace nimbus::monitor
