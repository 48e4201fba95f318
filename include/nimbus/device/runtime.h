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
  // f32 matmuls on CUDA may run on TF32 Tensor Cores (a 10-bit mantissa: errors near 3e-4, eight times
  // the f32 rate on an H200). Off by default, as in PyTorch; NIMBUS_CUDA_TF32=1 turns it on too.
  bool allow_tf32 = false;
};

void configure_runtime(const RuntimeOptions& options);

// While alive, kernels that split their own work over the compute pool (oneDNN's too: they ask
// omp_get_max_threads()) run on the calling thread alone: for work that takes less time than waking
// the pool's sleeping workers, and for a pipeline's per-element work, whose parallelism comes from
// its several threads (a team forked on each would oversubscribe the cores).
class CallingThreadOnly {
 public:
  CallingThreadOnly();
  ~CallingThreadOnly();
  CallingThreadOnly(const CallingThreadOnly&) = delete;
  CallingThreadOnly& operator=(const CallingThreadOnly&) = delete;

 private:
  int previous_;  // the pool's size before
};

// While alive, subnormal floats (below 1.2e-38 in f32) flush to zero in results and read as zero in
// inputs, on the calling thread and the compute pool's threads, as TensorFlow's CPU threads run; the
// modes before come back after. Training makes such values (Adam's second moments of tiny gradients),
// and on Intel cores each costs a microcode assist: the MLP example's step at batch 32 took twice as
// long from its 600th step on without it. Trainer::fit holds one, so a Python user's NumPy on the
// main thread keeps IEEE subnormals outside fit. (No effect on CPUs other than x86-64.)
class FlushDenormalsScope {
 public:
  FlushDenormalsScope();
  ~FlushDenormalsScope();
  FlushDenormalsScope(const FlushDenormalsScope&) = delete;
  FlushDenormalsScope& operator=(const FlushDenormalsScope&) = delete;

 private:
  unsigned previous_ = 0;  // the calling thread's MXCSR
};

// The OpenMP settings Nimbus runs best with, which libgomp reads once when it
// loads, before main: so a program applies them by re-executing itself.
// Call first thing in main:
//
//   int main(int argc, char** argv) {
//     nimbus::reexec_with_omp_defaults(argc, argv);
//     ...
//
// When the user has set none of OMP_WAIT_POLICY and GOMP_SPINCOUNT, this sets
// OMP_WAIT_POLICY=passive and replaces the process with /proc/self/exe run on
// the same arguments (once: the new process finds the variable set). Idle
// pool threads then sleep instead of spinning, which on small shared
// machines leaves the cores to the threads that work (docs/performance.md).
// Setting either variable, to any value, keeps the process as it is; so does
// a failed exec, which leaves the environment as it was.
void reexec_with_omp_defaults(int argc, char** argv);
const RuntimeOptions& runtime_options();
// The compute pool's thread count now in effect.
int compute_threads();
int hardware_cores();

}  // namespace nimbus
