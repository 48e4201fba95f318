#include "nimbus/device/runtime.h"

#include <fmt/format.h>
#include <omp.h>

#include <thread>

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

int compute_threads() { return omp_get_max_threads(); }

}  // namespace nimbus
