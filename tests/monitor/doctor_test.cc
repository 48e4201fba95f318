// nimbus doctor on three scripted runs, recorded by a RunMonitor as `nimbus train --run-dir` records
// them: an input-bound one (a slow map with parallelism 1), a healthy one and a leaking one (a callback
// that keeps tensors). Each gets the right diagnosis; the healthy one gets none.
#include "nimbus/monitor/doctor.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "nimbus/base/error.h"
#include "nimbus/data/dataset.h"
#include "nimbus/monitor/exporter.h"
#include "nimbus/monitor/run_monitor.h"
#include "nimbus/monitor/training_metrics.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/train/trainer.h"
#include "tests/monitor/monitor_test_util.h"

namespace nimbus::monitor {
namespace {

constexpr int64_t kSamples = 2048, kBatch = 32;

struct Problem {
  Tensor x = random_normal({kSamples, 64}, 0, 1);
  Tensor y = random_uniform({kSamples}, 0, 10).to(DType::kI64);
  train::Trainer trainer =
      train::compile(nn::Sequential({nn::InputLayer({64}), nn::Dense(256, {.activation = "relu"}),
                                     nn::Dense(256, {.activation = "relu"}), nn::Dense(10)}),
                     {.optimizer = train::Adam(), .loss = train::SparseCategoricalCrossentropy({.from_logits = true})});
};

std::vector<std::string> rules(const Diagnosis& diagnosis) {
  std::vector<std::string> names;
  for (const Finding& finding : diagnosis.findings) names.push_back(finding.rule);
  return names;
}

// Runs `train(monitor)` with a RunMonitor recording into a fresh run directory, then diagnoses it.
template <typename Train>
Diagnosis record_and_diagnose(Problem& problem, const std::string& dir, Train train) {
  std::ostringstream log;
  {
    RunMonitor monitor({.run_dir = dir, .sample_interval = std::chrono::milliseconds(200)}, log);
    monitor.attach(problem.trainer.profiler());
    train(monitor);
    monitor.finish();
  }
  const Diagnosis diagnosis = diagnose(read_run_dir(dir));
  std::cout << format_diagnosis(diagnosis);
  return diagnosis;
}

TEST(Doctor, InputBoundRunIsDiagnosedInputBound) {
  Problem problem;
  testing::TempDir dir("nimbus-doctor-input");
  // Decoding stand-in: 1 ms per sample, on the consumer's thread (parallelism 1).
  const data::Dataset dataset = data::Dataset::from_tensor_slices({problem.x, problem.y})
                                    .map(
                                        [](const data::Element& element) {
                                          std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                          return element;
                                        },
                                        /*num_parallel_calls=*/1)
                                    .batch(kBatch, /*drop_remainder=*/true);
  data::Iterator iterator = dataset.iterator();
  const Diagnosis diagnosis = record_and_diagnose(problem, dir.path(), [&](RunMonitor& monitor) {
    monitor.watch_pipeline([&iterator] { return iterator.stats_json(); });
    // The loop fit runs, with the data from a pipeline: the step profiler's spans around each part.
    StepProfiler& profiler = problem.trainer.profiler();
    for (int64_t step = 0; step < 30; ++step) {
      profiler.begin_step(1, step);
      std::optional<data::Element> batch;
      {
        auto span = profiler.span(Span::kInputWait);
        batch = iterator.next();
      }
      double loss = 0;
      {
        auto span = profiler.span(Span::kCompute);
        loss = problem.trainer.train_on_batch((*batch)[0], (*batch)[1]).at("loss");
      }
      profiler.end_step(kBatch, loss);
    }
  });
  EXPECT_EQ(rules(diagnosis), std::vector<std::string>{"input_bound"});
  ASSERT_FALSE(diagnosis.findings.empty());
  EXPECT_NE(diagnosis.findings[0].remedy.find("num_parallel_calls"), std::string::npos);
}

TEST(Doctor, HealthyRunHasNoFinding) {
  Problem problem;
  testing::TempDir dir("nimbus-doctor-healthy");
  const Diagnosis diagnosis = record_and_diagnose(problem, dir.path(), [&](RunMonitor&) {
    problem.trainer.fit(problem.x, problem.y, {.epochs = 2, .batch_size = kBatch, .verbose = 0});
  });
  EXPECT_TRUE(diagnosis.findings.empty()) << format_diagnosis(diagnosis);
  // The rules with data here did run.
  EXPECT_NE(std::find(diagnosis.rules_checked.begin(), diagnosis.rules_checked.end(), "input_bound"),
            diagnosis.rules_checked.end());
  EXPECT_NE(std::find(diagnosis.rules_checked.begin(), diagnosis.rules_checked.end(), "memory_growth"),
            diagnosis.rules_checked.end());
}

// Keeps a copy of the first layer's kernel after every step, as a careless "weight history" would.
struct KeepsTensors : train::Callback {
  std::vector<Tensor> kept;
  void on_train_batch_end(train::Trainer& trainer, int64_t, const train::Logs&) override {
    kept.push_back(trainer.model().weights()[0].value() * 1.0);
  }
};

TEST(Doctor, LeakingCallbackIsDiagnosedAsMemoryGrowthOfItsKind) {
  Problem problem;
  testing::TempDir dir("nimbus-doctor-leak");
  auto leak = std::make_shared<KeepsTensors>();
  const Diagnosis diagnosis = record_and_diagnose(problem, dir.path(), [&](RunMonitor&) {
    problem.trainer.fit(problem.x, problem.y, {.epochs = 1, .batch_size = kBatch, .verbose = 0, .callbacks = {leak}});
  });
  ASSERT_EQ(rules(diagnosis), std::vector<std::string>{"memory_growth"}) << format_diagnosis(diagnosis);
  // The callback allocates outside any tagged scope.
  EXPECT_NE(diagnosis.findings[0].title.find("'untagged'"), std::string::npos) << diagnosis.findings[0].title;
}

// doctor --url: one scrape of a live exporter carries the totals the input_bound rule needs.
TEST(Doctor, LiveExporterOfAnInputBoundRunIsDiagnosedInputBound) {
  MetricRegistry registry;
  TrainingMetrics training(registry, Device::cpu());
  MetricsExporter exporter(registry, "127.0.0.1", 0);
  StepRecord step;
  step.end_ns = 50'000'000;
  step.samples = 32;
  step.spans[Span::kInputWait] = 0.030;  // 60% of each step
  step.spans[Span::kCompute] = 0.018;
  for (int i = 0; i < 10; ++i) training.on_step(step);
  const Diagnosis diagnosis = diagnose(read_exporter(exporter.url()));
  EXPECT_EQ(rules(diagnosis), std::vector<std::string>{"input_bound"}) << format_diagnosis(diagnosis);
  ASSERT_FALSE(diagnosis.findings.empty());
  EXPECT_NE(diagnosis.findings[0].evidence.find("60%"), std::string::npos) << diagnosis.findings[0].evidence;
}

TEST(Doctor, RunDirectoryWithoutMetricsIsAClearError) {
  testing::TempDir dir("nimbus-doctor-empty");
  EXPECT_THROW(read_run_dir(dir.path()), NotFound);
  std::ofstream(dir.path() + "/metrics.jsonl") << "{\"type\":\"step\"}\nnot json\n";
  try {
    read_run_dir(dir.path());
    FAIL() << "a malformed line was accepted";
  } catch (const DataError& error) {
    EXPECT_NE(std::string(error.what()).find("metrics.jsonl:2"), std::string::npos) << error.what();
  }
}

// Rules without their data stay silent and say what they lacked.
TEST(Doctor, RulesWithoutDataAreSilent) {
  RunRecord run;
  const Diagnosis diagnosis = diagnose(run);
  EXPECT_TRUE(diagnosis.findings.empty());
  EXPECT_TRUE(diagnosis.rules_checked.empty());
  EXPECT_EQ(diagnosis.rules_silent.size(), 6u);
}

// Scripted records for the rules this machine cannot produce: device figures, loss scale, workers.
TEST(Doctor, DeviceLossScaleAndStragglerRulesFireOnTheirData) {
  RunRecord run;
  for (int i = 0; i < 40; ++i) {
    StepLine step;
    step.step = i;
    step.step_seconds = i % 2 == 0 ? 0.004 : 0.006;  // worker 1 is 50% slower
    step.worker = i % 2;
    SpanSeconds spans;
    spans[Span::kCompute] = step.step_seconds;
    step.spans = spans;
    step.loss_scale = 32768.0 / double(1 << std::min(i, 15));
    run.steps.push_back(step);
  }
  for (int i = 0; i < 5; ++i) {
    SampleLine sample;
    sample.devices.push_back({.index = 0, .sm_util_percent = 25, .memory_used_bytes = 2e9, .memory_total_bytes = 80e9});
    run.samples.push_back(sample);
  }
  const std::vector<std::string> found = rules(diagnose(run));
  EXPECT_EQ(found, (std::vector<std::string>{"launch_bound", "memory_headroom", "loss_scale", "stragglers"}));
}

}  // namespace
}  // namespace nimbus::monitor
