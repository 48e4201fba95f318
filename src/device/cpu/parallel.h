// Splitting loops over the compute pool (OpenMP, shared with oneDNN).
// Internal to the library.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace nimbus::cpu {

// Calls f(begin, end) on disjoint ranges covering [0, n), in parallel when n
// is worth it. Ranges are at least `grain` long (except the last).
template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
  if (chunks <= 1) {
    f(int64_t{0}, n);
    return;
  }
#pragma omp parallel for num_threads(static_cast <int>(chunks)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    f(n * c / chunks, n * (c + 1) / chunks);
  }
}

}  // namespace nimbus::cpu
