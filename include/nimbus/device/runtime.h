// Process-wide runtime settings: compute threads, determinism and the seed
// (the runtime.* keys of configs).
//
//   RuntimeOptions options;
//   options.threads = 2;
//   options.deterministic = true;
//   configure_runtime(options);
//
// Compute kernels (ours and oneDNN's) share one OpenMP pool of
// `threads` threads, so nothing oversubscribes the cores.
#pragma once

#include <cstdint>
#include <optional>

namespace nimbus {

struct RuntimeOptions {
  // 0 means all cores.
  int threads = 0;
  // Bit-reproducible results run to run: fixed reduction orders, every
  // random draw from the seed.
  bool deterministic = false;
  std::optional<uint64_t> seed;
  // Traced functions run as optimized graphs (false: every call runs eagerly,
  // like Keras's run_eagerly).
  bool graph = true;
  // Graph mode fuses chains of elementwise ops into single kernels (the JIT switch).
  bool jit = true;
};

void configure_runtime(const RuntimeOptions& options);
const RuntimeOptions& runtime_options();
// The compute pool's thread count now in effect.
int compute_threads();
int hardware_cores();

}  // namespace nimbus
