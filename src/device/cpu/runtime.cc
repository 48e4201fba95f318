#include "nimbus/device/runtime.h"

#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "nimbus/base/error.h"
#include "nimbus/base/rng.h"

namespace nimbus {

namespace {
RuntimeOptions& current_options() {
  static RuntimeOptions options;
  return options;
}
}  // namespace

int hardware_cores() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void configure_runtime(const RuntimeOptions& options) {
  if (options.threads < 0) {
    throw InvalidArgument(fmt::format("runtime.threads is {}, it must be 0 (all cores) or positive", options.threads));
  }
  current_options() = options;
  // oneDNN's CPU engine runs on the same OpenMP pool, so this one call sizes both.
  omp_set_num_threads(options.threads == 0 ? hardware_cores() : options.threads);
  if (options.seed) manual_seed(*options.seed);
}

const RuntimeOptions& runtime_options() { return current_options(); }

#if defined(__x86_64__)
namespace {
constexpr unsigned kFlushToZero = 1u << 15, kDenormalsAreZero = 1u << 6;  // MXCSR bits
constexpr unsigned kFlushDenormals = kFlushToZero | kDenormalsAreZero;

// The pool's threads (libgomp's workers keep theirs between regions; ones it starts later copy the
// calling thread's).
void set_pool_flush_denormals(bool on) {
#pragma omp parallel
  {
    const unsigned mode = _mm_getcsr();
    _mm_setcsr(on ? mode | kFlushDenormals : mode & ~kFlushDenormals);
  }
}
}  // namespace

FlushDenormalsScope::FlushDenormalsScope() : previous_(_mm_getcsr()) {
  _mm_setcsr(previous_ | kFlushDenormals);
  set_pool_flush_denormals(true);
}

FlushDenormalsScope::~FlushDenormalsScope() {
  set_pool_flush_denormals((previous_ & kFlushDenormals) == kFlushDenormals);
  _mm_setcsr(previous_);
}
#else
FlushDenormalsScope::FlushDenormalsScope() = default;
FlushDenormalsScope::~FlushDenormalsScope() = default;
#endif

int compute_threads() { return omp_get_max_threads(); }

CallingThreadOnly::CallingThreadOnly() : previous_(omp_get_max_threads()) { omp_set_num_threads(1); }
CallingThreadOnly::~CallingThreadOnly() { omp_set_num_threads(previous_); }

void reexec_with_omp_defaults(int argc, char** argv) {
  if (argc < 1 || std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Only reached when exec failed: carry on with libgomp's defaults, as if never called.
  unsetenv("OMP_WAIT_POLICY");
}

}  // namespace nimbus
