// Graph mode against eager, side by side in one binary (Google Benchmark):
//   mlp_step/{eager,graph,graph_jit}/B   one training step of the PyTorch peer's MLP
//       (784-512-256-10, ReLU, softmax cross-entropy, Adam 1e-3) at batch B,
//       including the gather of a shuffled minibatch from the preloaded
//       Fashion-MNIST images, as ../shared/peers/py/train_fmnist.py --mode steps does;
//   block_step/{graph,graph_jit}/B        an elementwise-heavy step: a residual
//       MLP block with GELU, layer norm and residual adds (d = 256), SGD;
//   cnn_step/{eager,graph,graph_jit}/B    the peer's CNN (conv32-pool-conv64-pool-dense128-dense10), Adam.
// Counters: samples/s; for graph modes also the arena (planned intermediates),
// the same intermediates without reuse, and allocator calls per step.
// bench/run_graph.sh runs this next to PyTorch and prints the ratios.
#include <benchmark/benchmark.h>

#include <cmath>
#include <memory>
#include <string>

#include "nimbus/data/idx.h"
#include "nimbus/graph/function.h"
#include "nimbus/nimbus.h"

namespace {

using nimbus::Function;
using nimbus::Tensor;
using nimbus::Variable;

// The Fashion-MNIST training images as f32 (60000, 28, 28, 1) in [0, 1] and labels as i64, loaded once.
struct Data {
  Tensor images, labels;
  static const Data& get() {
    static const Data data = [] {
      const std::string dir = nimbus::data::kFashionMnistDir;
      Tensor images = nimbus::data::read_idx(dir + "/train-images-idx3-ubyte.gz").to(nimbus::DType::kF32) / 255.0;
      Tensor labels = nimbus::data::read_idx(dir + "/train-labels-idx1-ubyte.gz").to(nimbus::DType::kI64);
      return Data{nimbus::reshape(images, std::vector<int64_t>{60000, 28, 28, 1}), labels};
    }();
    return data;
  }
};

// Adam (Kingma and Ba) written with ops; the bias-corrected step size comes in
// as a scalar tensor so that one traced graph serves every step.
struct Adam {
  std::vector<Variable> params, m, v;
  explicit Adam(std::vector<Variable> p) : params(std::move(p)) {
    for (const Variable& w : params) {
      m.emplace_back(nimbus::zeros_like(w.value()), w.name() + "/m", false);
      v.emplace_back(nimbus::zeros_like(w.value()), w.name() + "/v", false);
    }
  }
  // Host side: the step size for update number t (from 1).
  static Tensor step_size(int64_t t, double lr = 1e-3) {
    return nimbus::full({}, lr * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t)));
  }
  void apply(const std::vector<Tensor>& grads, const Tensor& step_size) {
    for (size_t i = 0; i < params.size(); ++i) {
      m[i].assign(m[i].value() * 0.9 + grads[i] * 0.1);
      v[i].assign(v[i].value() * 0.999 + nimbus::square(grads[i]) * 0.001);
      params[i].assign_sub(step_size * m[i].value() / (nimbus::sqrt(v[i].value()) + 1e-7));
    }
  }
};

Variable dense_kernel(int64_t in, int64_t out, const std::string& name, nimbus::Generator& gen) {
  const double limit = std::sqrt(6.0 / static_cast<double>(in + out));  // glorot_uniform
  return Variable(nimbus::random_uniform({in, out}, -limit, limit, nimbus::DType::kF32, nimbus::Device::cpu(), &gen),
                  name);
}

// A model: its parameters, a loss on (x, labels), and Adam; step() is what gets traced.
struct Model {
  std::vector<Variable> params;
  std::function<Tensor(const Tensor& x, const Tensor& labels)> loss;
  std::unique_ptr<Adam> adam;

  std::vector<Tensor> step(const std::vector<Tensor>& in) {
    nimbus::GradientTape tape;
    const Tensor value = loss(in[0], in[1]);
    adam->apply(tape.gradient(value, params), in[2]);
    return {value};
  }
};

std::unique_ptr<Model> make_mlp() {
  nimbus::Generator gen(1);
  auto model = std::make_unique<Model>();
  model->params = {dense_kernel(784, 512, "d1/kernel", gen), Variable(nimbus::zeros({512}), "d1/bias"),
                   dense_kernel(512, 256, "d2/kernel", gen), Variable(nimbus::zeros({256}), "d2/bias"),
                   dense_kernel(256, 10, "d3/kernel", gen),  Variable(nimbus::zeros({10}), "d3/bias")};
  Model* m = model.get();
  model->loss = [m](const Tensor& images, const Tensor& labels) {
    const auto& p = m->params;
    Tensor x = nimbus::reshape(images, std::vector<int64_t>{images.dim(0), 784});
    x = nimbus::relu(nimbus::matmul(x, p[0].value()) + p[1].value());
    x = nimbus::relu(nimbus::matmul(x, p[2].value()) + p[3].value());
    const Tensor logits = nimbus::matmul(x, p[4].value()) + p[5].value();
    return nimbus::mean(nimbus::sparse_softmax_cross_entropy(logits, labels));
  };
  model->adam = std::make_unique<Adam>(model->params);
  return model;
}

std::unique_ptr<Model> make_cnn() {
  nimbus::Generator gen(1);
  auto model = std::make_unique<Model>();
  auto conv_kernel = [&](int64_t in, int64_t out, const std::string& name) {
    const double limit = std::sqrt(6.0 / static_cast<double>(9 * (in + out)));
    return Variable(
        nimbus::random_uniform({3, 3, in, out}, -limit, limit, nimbus::DType::kF32, nimbus::Device::cpu(), &gen), name);
  };
  model->params = {conv_kernel(1, 32, "c1/kernel"),           Variable(nimbus::zeros({32}), "c1/bias"),
                   conv_kernel(32, 64, "c2/kernel"),          Variable(nimbus::zeros({64}), "c2/bias"),
                   dense_kernel(64 * 7 * 7, 128, "d1/kernel", gen), Variable(nimbus::zeros({128}), "d1/bias"),
                   dense_kernel(128, 10, "d2/kernel", gen),   Variable(nimbus::zeros({10}), "d2/bias")};
  Model* m = model.get();
  model->loss = [m](const Tensor& images, const Tensor& labels) {
    const auto& p = m->params;
    const nimbus::Conv2dOptions same{.padding = "same"};
    Tensor x = nimbus::relu(nimbus::conv2d(images, p[0].value(), same) + p[1].value());
    x = nimbus::max_pool2d(x);
    x = nimbus::relu(nimbus::conv2d(x, p[2].value(), same) + p[3].value());
    x = nimbus::flatten(nimbus::max_pool2d(x));
    x = nimbus::relu(nimbus::matmul(x, p[4].value()) + p[5].value());
    const Tensor logits = nimbus::matmul(x, p[6].value()) + p[7].value();
    return nimbus::mean(nimbus::sparse_softmax_cross_entropy(logits, labels));
  };
  model->adam = std::make_unique<Adam>(model->params);
  return model;
}

// A residual block with GELU and layer norm over d features, trained towards a target with SGD.
std::unique_ptr<Model> make_block(int64_t d) {
  nimbus::Generator gen(2);
  auto model = std::make_unique<Model>();
  model->params = {dense_kernel(d, 4 * d, "up", gen), Variable(nimbus::zeros({4 * d}), "up/bias"),
                   dense_kernel(4 * d, d, "down", gen), Variable(nimbus::zeros({d}), "down/bias"),
                   Variable(nimbus::ones({d}), "ln/gamma"), Variable(nimbus::zeros({d}), "ln/beta")};
  Model* m = model.get();
  model->loss = [m](const Tensor& x, const Tensor& target) {
    const auto& p = m->params;
    const Tensor h = nimbus::gelu(nimbus::matmul(x, p[0].value()) + p[1].value());
    const Tensor y = nimbus::layer_norm(x + nimbus::matmul(h, p[2].value()) + p[3].value(), p[4].value(), p[5].value());
    const Tensor z = nimbus::gelu(y) * 0.5 + y;
    return nimbus::mean(nimbus::square(z - target));
  };
  model->adam = std::make_unique<Adam>(model->params);
  return model;
}

enum class Mode { kEager, kGraph, kGraphJit };

// Times `steps` training steps on batches that `next_batch` makes, in `mode`.
template <typename NextBatch>
void run_steps(benchmark::State& state, Model& model, Mode mode, NextBatch next_batch) {
  const int64_t batch = state.range(0);
  Function step = nimbus::function([&model](const std::vector<Tensor>& in) { return model.step(in); },
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
  state.counters["samples/s"] = benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["allocs/step"] = static_cast<double>(after.num_allocations - before.num_allocations) /
                                  static_cast<double>(state.iterations());
  if (mode != Mode::kEager) {
    auto [x, y] = next_batch(batch);
    const nimbus::TracedGraph& traced = step.traced_for({x, y, Adam::step_size(1)});
    state.counters["arena_MiB"] = static_cast<double>(traced.plan.arena_bytes) / (1 << 20);
    state.counters["unplanned_MiB"] = static_cast<double>(traced.plan.unplanned_bytes) / (1 << 20);
    state.counters["ops"] = traced.optimized.op_count();
  }
}

// A shuffled minibatch of Fashion-MNIST, gathered by index as the PyTorch peer does.
auto fashion_batches(bool flat) {
  return [flat, gen = std::make_shared<nimbus::Generator>(7)](int64_t batch) {
    const Data& data = Data::get();
    const Tensor index = nimbus::cast(
        nimbus::random_uniform({batch}, 0, 60000, nimbus::DType::kF64, nimbus::Device::cpu(), gen.get()),
        nimbus::DType::kI64);
    Tensor x = nimbus::gather(data.images, index, 0);
    if (flat) x = nimbus::reshape(x, std::vector<int64_t>{batch, 784});
    return std::make_pair(x, nimbus::gather(data.labels, index, 0));
  };
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
  const Tensor x = nimbus::random_normal({state.range(0), kWidth}, 0, 1, nimbus::DType::kF32, nimbus::Device::cpu(), &gen);
  const Tensor target = nimbus::random_normal({state.range(0), kWidth}, 0, 1, nimbus::DType::kF32, nimbus::Device::cpu(), &gen);
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
