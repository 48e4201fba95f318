// Graph mode against eager, side by side in one binary (Google Benchmark):
//   mlp_step/{eager,graph,graph_jit}/B   one training step of the PyTorch peer's MLP
//       (784-512-256-10, ReLU, softmax cross-entropy, Adam 1e-3) at batch B,
//       including the gather of a shuffled minibatch from the preloaded
//       Fashion-MNIST images, as ../shared/peers/py/train_fmnist.py --mode steps does;
//   block_step/{graph,graph_jit}/B        an elementwise-heavy step: a residual
//       MLP block with GELU, layer norm and residual adds (d = 256), SGD;
//   cnn_step/{eager,graph,graph_jit}/B    the peer's CNN (conv32-pool-conv64-pool-dense128-dense10), Adam.
// Counters: samples/s; kernel_share (the kernels' part of the step's wall
// time, the rest being dispatch, tape and allocation), kernels/step and
// allocator calls per step; for graph modes also the arena (planned
// intermediates) and the same intermediates without reuse.
// bench/run_graph.sh runs this next to PyTorch and prints the ratios.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>

#include "nimbus/graph/function.h"
#include "nimbus/nimbus.h"
#include "nimbus/ops/op_profile.h"
#include "tests/support/step_models.h"

namespace {

using nimbus::Function;
using nimbus::Tensor;
using nimbus::testing::Adam;
using nimbus::testing::fashion_batches;
using nimbus::testing::make_block;
using nimbus::testing::make_cnn;
using nimbus::testing::make_mlp;
using nimbus::testing::Model;

enum class Mode { kEager, kGraph, kGraphJit };

// Times `steps` training steps on batches that `next_batch` makes, in `mode`.
template <typename NextBatch>
void run_steps(benchmark::State& state, Model& model, Mode mode, NextBatch next_batch) {
  const int64_t batch = state.range(0);
  Function step =
      nimbus::function([&model](const std::vector<Tensor>& in) { return model.step(in); },
                       {.name = "train_step", .graph = mode != Mode::kEager, .jit = mode == Mode::kGraphJit});
  int64_t t = 1;
  auto run_one = [&] {
    auto [x, y] = next_batch(batch);
    return step({x, y, Adam::step_size(t++)});
  };
  for (int i = 0; i < 3; ++i) run_one();  // trace and warm up
  const nimbus::AllocatorStats before = nimbus::allocator_for(nimbus::Device::cpu()).stats();
  for (auto _ : state) benchmark::DoNotOptimize(run_one());
  const nimbus::AllocatorStats after = nimbus::allocator_for(nimbus::Device::cpu()).stats();
  state.counters["samples/s"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["allocs/step"] =
      static_cast<double>(after.num_allocations - before.num_allocations) / static_cast<double>(state.iterations());
  {
    // Where the step's time goes: kernels against everything else (dispatch,
    // tape, allocation), over a few more steps with kernel timing on.
    constexpr int kProfiledSteps = 10;
    nimbus::OpProfile profile;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kProfiledSteps; ++i) run_one();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.counters["kernel_share"] = profile.kernel_seconds() / wall;
    state.counters["kernels/step"] = static_cast<double>(profile.kernel_calls()) / kProfiledSteps;
  }
  if (mode != Mode::kEager) {
    auto [x, y] = next_batch(batch);
    const nimbus::TracedGraph& traced = step.traced_for({x, y, Adam::step_size(1)});
    state.counters["arena_MiB"] = static_cast<double>(traced.plan.arena_bytes) / (1 << 20);
    state.counters["unplanned_MiB"] = static_cast<double>(traced.plan.unplanned_bytes) / (1 << 20);
    state.counters["ops"] = traced.optimized.op_count();
  }
}

void mlp_step(benchmark::State& state, Mode mode) {
  auto model = make_mlp();
  run_steps(state, *model, mode, fashion_batches(true));
}
void cnn_step(benchmark::State& state, Mode mode) {
  auto model = make_cnn();
  run_steps(state, *model, mode, fashion_batches(false));
}
void block_step(benchmark::State& state, Mode mode) {
  constexpr int64_t kWidth = 256;
  auto model = make_block(kWidth);
  nimbus::Generator gen(3);
  const Tensor x =
      nimbus::random_normal({state.range(0), kWidth}, 0, 1, nimbus::DType::kF32, nimbus::Device::cpu(), &gen);
  const Tensor target =
      nimbus::random_normal({state.range(0), kWidth}, 0, 1, nimbus::DType::kF32, nimbus::Device::cpu(), &gen);
  run_steps(state, *model, mode, [&](int64_t) { return std::make_pair(x, target); });
}

BENCHMARK_CAPTURE(mlp_step, eager, Mode::kEager)->Arg(32)->Arg(128)->UseRealTime();
BENCHMARK_CAPTURE(mlp_step, graph, Mode::kGraph)->Arg(32)->Arg(128)->UseRealTime();
BENCHMARK_CAPTURE(mlp_step, graph_jit, Mode::kGraphJit)->Arg(32)->Arg(128)->UseRealTime();
BENCHMARK_CAPTURE(block_step, eager, Mode::kEager)->Arg(256)->UseRealTime();
BENCHMARK_CAPTURE(block_step, graph, Mode::kGraph)->Arg(256)->UseRealTime();
BENCHMARK_CAPTURE(block_step, graph_jit, Mode::kGraphJit)->Arg(256)->UseRealTime();
BENCHMARK_CAPTURE(cnn_step, eager, Mode::kEager)->Arg(128)->UseRealTime();
BENCHMARK_CAPTURE(cnn_step, graph, Mode::kGraph)->Arg(128)->UseRealTime();
BENCHMARK_CAPTURE(cnn_step, graph_jit, Mode::kGraphJit)->Arg(128)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  nimbus::reexec_with_omp_defaults(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
