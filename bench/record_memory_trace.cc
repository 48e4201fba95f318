// Records the CPU allocator's requests during eager training of
// bench_graph's MLP (784-512-256-10, ReLU, softmax cross-entropy, Adam) and
// writes them as a trace that tests/memory and bench_memory replay:
//
//   build/release/bench/record_memory_trace tests/memory/data/mlp_eager_trace.txt [steps=4] [batch=128]
//
// The trace holds the whole run: a 4096-image training set, the model and its
// Adam slots, then `steps` steps, each gathering a shuffled batch; at the end
// everything is freed. Lines: "a <id> <bytes> <tag>" for an allocation (ids
// count from 0, tag as nimbus::MemoryTag's value), "f <id>" for its release,
// and "# <phase> done" after the setup, each step and the teardown.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "nimbus/device/bfc_allocator.h"
#include "nimbus/device/memory_trace.h"
#include "nimbus/nimbus.h"

namespace {

using nimbus::AllocationTagScope;
using nimbus::MemoryTag;
using nimbus::Tensor;
using nimbus::Variable;

struct Adam {
  std::vector<Variable> params, m, v;
  explicit Adam(std::vector<Variable> p) : params(std::move(p)) {
    AllocationTagScope tag(MemoryTag::kOptimizerSlots);
    for (const Variable& w : params) {
      m.emplace_back(nimbus::zeros_like(w.value()), w.name() + "/m", false);
      v.emplace_back(nimbus::zeros_like(w.value()), w.name() + "/v", false);
    }
  }
  void apply(const std::vector<Tensor>& grads, int64_t t, double lr = 1e-3) {
    AllocationTagScope tag(MemoryTag::kWorkspace);
    const Tensor step_size = nimbus::full({}, lr * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t)));
    for (size_t i = 0; i < params.size(); ++i) {
      m[i].assign(m[i].value() * 0.9 + grads[i] * 0.1);
      v[i].assign(v[i].value() * 0.999 + nimbus::square(grads[i]) * 0.001);
      params[i].assign_sub(step_size * m[i].value() / (nimbus::sqrt(v[i].value()) + 1e-7));
    }
  }
};

Variable dense_kernel(int64_t in, int64_t out, const std::string& name, nimbus::Generator& gen) {
  const double limit = std::sqrt(6.0 / static_cast<double>(in + out));
  return Variable(nimbus::random_uniform({in, out}, -limit, limit, nimbus::DType::kF32, nimbus::Device::cpu(), &gen),
                  name);
}

// Runs the training; `phase_done(name)` is called after the setup, after each
// step, and after the teardown.
void train(int steps, int64_t batch, const std::function<void(const std::string&)>& phase_done) {
  nimbus::Generator gen(1);
  Tensor images, labels;
  {
    AllocationTagScope tag(MemoryTag::kInputBatches);
    images = nimbus::random_uniform({4096, 784}, 0, 1, nimbus::DType::kF32, nimbus::Device::cpu(), &gen);
    labels = nimbus::cast(nimbus::random_uniform({4096}, 0, 10, nimbus::DType::kF64, nimbus::Device::cpu(), &gen),
                          nimbus::DType::kI64);
  }
  std::vector<Variable> params;
  {
    AllocationTagScope tag(MemoryTag::kParameters);
    params = {dense_kernel(784, 512, "d1/kernel", gen), Variable(nimbus::zeros({512}), "d1/bias"),
              dense_kernel(512, 256, "d2/kernel", gen), Variable(nimbus::zeros({256}), "d2/bias"),
              dense_kernel(256, 10, "d3/kernel", gen),  Variable(nimbus::zeros({10}), "d3/bias")};
  }
  Adam adam(params);
  phase_done("setup");
  for (int t = 1; t <= steps; ++t) {
    Tensor x, y;
    {
      AllocationTagScope tag(MemoryTag::kInputBatches);
      const Tensor index =
          nimbus::cast(nimbus::random_uniform({batch}, 0, 4096, nimbus::DType::kF64, nimbus::Device::cpu(), &gen),
                       nimbus::DType::kI64);
      x = nimbus::gather(images, index, 0);
      y = nimbus::gather(labels, index, 0);
    }
    std::vector<Tensor> grads;
    {
      nimbus::GradientTape tape;
      Tensor loss;
      {
        AllocationTagScope tag(MemoryTag::kActivations);
        Tensor h = nimbus::relu(nimbus::matmul(x, params[0].value()) + params[1].value());
        h = nimbus::relu(nimbus::matmul(h, params[2].value()) + params[3].value());
        const Tensor logits = nimbus::matmul(h, params[4].value()) + params[5].value();
        loss = nimbus::mean(nimbus::sparse_softmax_cross_entropy(logits, y));
      }
      AllocationTagScope tag(MemoryTag::kGradients);
      grads = tape.gradient(loss, params);
    }
    adam.apply(grads, t);
    phase_done(fmt::format("step {}", t));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: %s TRACE_FILE [steps=4] [batch=128]\n", argv[0]);
    return 2;
  }
  const int steps = argc > 2 ? std::atoi(argv[2]) : 4;
  const int64_t batch = argc > 3 ? std::atoll(argv[3]) : 128;
  auto& allocator = dynamic_cast<nimbus::BfcAllocator&>(nimbus::allocator_for(nimbus::Device::cpu()));
  // Recorded one phase at a time, so that the trace marks where each phase ends.
  nimbus::MemoryTrace trace;
  allocator.start_recording();
  train(steps, batch, [&](const std::string& name) {
    trace.add(allocator.stop_recording(), name);
    allocator.start_recording();
  });
  trace.add(allocator.stop_recording(), "teardown");
  nimbus::write_memory_trace(trace, argv[1],
                             fmt::format("Nimbus allocation trace: eager MLP 784-512-256-10 + Adam, batch {}, {} steps "
                                         "(bench/record_memory_trace.cc)",
                                         batch, steps));
  size_t live = 0;
  for (const nimbus::MemoryTraceEvent& e : trace.events) live += e.allocate ? 1 : -1;
  std::printf("%zu allocations, %zu still live at the end\n", trace.allocations(), live);
  return 0;
}
