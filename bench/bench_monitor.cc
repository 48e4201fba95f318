// What the step profiler and the run monitor cost per training step, against the step itself.
//
//   profiler/spans           begin_step, the five spans fit records (one nested), end_step: the
//                            profiler alone (always on in fit)
//   profiler/run_monitor     the same with a RunMonitor attached: nimbus_ metrics updated, allocator
//                            statistics read and a metrics.jsonl step line written per step, samplers
//                            and the /metrics exporter running
//   step/mlp_batch128        one train_on_batch of the Fashion-MNIST MLP (784-512-256-10, Adam),
//                            batch 128, graph mode: the step being profiled
//
// overhead = profiler time / step time (bench/run_monitor.sh prints it).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "nimbus/monitor/run_monitor.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/creation.h"
#include "nimbus/train/trainer.h"

namespace {

using nimbus::monitor::Span;

void profiled_step(nimbus::monitor::StepProfiler& profiler, int64_t step) {
  profiler.begin_step(1, step);
  { auto span = profiler.span(Span::kInputWait); }
  {
    auto compute = profiler.span(Span::kCompute);
    auto update = profiler.span(Span::kOptimizerUpdate);
  }
  { auto span = profiler.span(Span::kCallbacks); }
  profiler.end_step(128, 0.5);
}

void BM_ProfilerSpans(benchmark::State& state) {
  nimbus::monitor::StepProfiler profiler;
  int64_t step = 0;
  for (auto _ : state) profiled_step(profiler, step++);
}
BENCHMARK(BM_ProfilerSpans)->Name("profiler/spans");

void BM_ProfilerWithRunMonitor(benchmark::State& state) {
  nimbus::monitor::StepProfiler profiler;
  const std::string dir = std::filesystem::temp_directory_path() / ("nimbus-bench-monitor-" + std::to_string(getpid()));
  std::ostringstream log;
  {
    nimbus::monitor::RunMonitor monitor({.metrics_port = 0, .run_dir = dir}, log);
    monitor.attach(profiler);
    int64_t step = 0;
    for (auto _ : state) profiled_step(profiler, step++);
    monitor.finish();
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_ProfilerWithRunMonitor)->Name("profiler/run_monitor");

void BM_MlpStep(benchmark::State& state) {
  using namespace nimbus;
  const Tensor x = random_normal({128, 28, 28, 1}, 0, 1);
  const Tensor y = random_uniform({128}, 0, 10).to(DType::kI64);
  train::Trainer trainer =
      train::compile(nn::Sequential({nn::InputLayer({28, 28, 1}), nn::Flatten(), nn::Dense(512, {.activation = "relu"}),
                                     nn::Dense(256, {.activation = "relu"}), nn::Dense(10)}),
                     {.optimizer = train::Adam(), .loss = train::SparseCategoricalCrossentropy({.from_logits = true})});
  trainer.train_on_batch(x, y);  // traces the step
  for (auto _ : state) benchmark::DoNotOptimize(trainer.train_on_batch(x, y));
}
BENCHMARK(BM_MlpStep)->Name("step/mlp_batch128")->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
