// Fused attention against the unfused ops, eager, forward + backward
// (gradients of q, k and v), f32:
//   time   causal, batch 4, 4 heads, head size 64, T = 1024 (or --sequence): the
//          two forms alternate round by round so that a change of load hits both
//          alike; prints each step ("step fused MS"), each form's median and range,
//          and the ratio of medians;
//   memory the allocator's peak bytes in use during one such training step, less
//          what was in use before it (the inputs), at T = 512, 1024 and 2048.
// bench/attention_vs_torch.sh runs it beside PyTorch (docs/language_models.md).
//
//   bench_attention [--rounds N] [--sequence T] [--memory]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "nimbus/autodiff/gradient_tape.h"
#include "nimbus/base/rng.h"
#include "nimbus/device/backend.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/nn.h"

namespace {

using namespace nimbus;

constexpr int64_t kBatch = 4, kHeads = 4, kHeadSize = 64;

struct Inputs {
  Tensor q, k, v, grad_out;
};

Inputs make_inputs(int64_t sequence) {
  Generator generator(11);
  const Shape shape{kBatch, kHeads, sequence, kHeadSize};
  const auto draw = [&] { return random_uniform(shape, -1, 1, DType::kF32, Device::cpu(), &generator); };
  return {draw(), draw(), draw(), draw()};
}

// One training step of the attention alone: forward, then the gradients of q, k and v.
void step(const Inputs& in, bool fused) {
  GradientTape tape;
  for (const Tensor& x : {in.q, in.k, in.v}) tape.watch(x);
  const AttentionOptions options{.causal = true};
  const Tensor out = fused ? scaled_dot_product_attention(in.q, in.k, in.v, options)
                           : scaled_dot_product_attention_unfused(in.q, in.k, in.v, options);
  const std::vector<Tensor> grads = tape.gradient(out, {in.q, in.k, in.v}, in.grad_out);
  (void)grads[0].raw_data();
}

double seconds_of_step(const Inputs& in, bool fused) {
  const auto start = std::chrono::steady_clock::now();
  step(in, fused);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

void time_forms(int64_t sequence, int rounds) {
  const Inputs in = make_inputs(sequence);
  step(in, true);  // warm-up: kernels' scratch, oneDNN's primitives
  step(in, false);
  std::vector<double> fused, unfused;
  for (int round = 0; round < rounds; ++round) {
    fused.push_back(seconds_of_step(in, true));
    unfused.push_back(seconds_of_step(in, false));
    // One line per step, for bench/attention_vs_torch.sh to pool over its rounds.
    fmt::print("step fused {:.2f}\nstep unfused {:.2f}\n", 1e3 * fused.back(), 1e3 * unfused.back());
  }
  const auto row = [](const char* form, const std::vector<double>& t) {
    fmt::print("{:8} {:>10.1f} ms   range {:.1f} .. {:.1f} ms\n", form, 1e3 * median(t),
               1e3 * *std::min_element(t.begin(), t.end()), 1e3 * *std::max_element(t.begin(), t.end()));
  };
  fmt::print("attention forward + backward, causal, f32, B {} H {} T {} D {}, {} rounds (median, range)\n", kBatch,
             kHeads, sequence, kHeadSize, rounds);
  row("fused", fused);
  row("unfused", unfused);
  fmt::print("fused speed-up: {:.2f}x\n", median(unfused) / median(fused));
}

void measure_memory() {
  Allocator& allocator = allocator_for(Device::cpu());
  fmt::print("\npeak memory of one training step (allocator, MiB, beyond its inputs), B {} H {} D {}, causal f32\n",
             kBatch, kHeads, kHeadSize);
  fmt::print("{:>6} {:>10} {:>10}\n", "T", "fused", "unfused");
  for (int64_t sequence : {512, 1024, 2048}) {
    const Inputs in = make_inputs(sequence);
    double peak[2];
    for (bool fused : {true, false}) {
      step(in, fused);  // scratch sized once, as a training run's first step does
      const uint64_t before = allocator.stats().bytes_in_use;
      allocator.reset_peak();
      step(in, fused);
      peak[fused ? 0 : 1] = static_cast<double>(allocator.stats().peak_bytes_in_use - before) / (1 << 20);
    }
    fmt::print("{:>6} {:>10.1f} {:>10.1f}\n", sequence, peak[0], peak[1]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 7;
  int64_t sequence = 1024;
  bool memory = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::stoi(argv[++i]);
    } else if (arg == "--sequence" && i + 1 < argc) {
      sequence = std::stoll(argv[++i]);
    } else if (arg == "--memory") {
      memory = true;
    } else {
      fmt::print(stderr, "usage: bench_attention [--rounds N] [--sequence T] [--memory]\n");
      return 2;
    }
  }
  time_forms(sequence, rounds);
  if (memory) measure_memory();
  return 0;
}
