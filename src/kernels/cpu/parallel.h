// Splitting loops over the compute pool (OpenMP, shared with oneDNN).
// Internal to the library.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace nimbus::cpu {

// Elements per thread below which a loop stays on the calling thread: an
// OpenMP fork/join costs a few microseconds (tens when the workers sleep),
// which is what a memory-bound pass over ~32K floats takes, and what a
// transcendental function takes over ~8K. A batch-32 MLP step's tensors
// (32 x 256 = 8K elements) therefore never fork.
inline constexpr int64_t kMemoryBoundGrain = int64_t{1} << 15;
inline constexpr int64_t kMathGrain = int64_t{1} << 14;

// Calls f(begin, end) on disjoint ranges covering [0, n), in parallel when n
// is worth it. Ranges are at least `grain` long (except the last), and their
// boundaries are multiples of `align` so that no two threads write to the same
// cache line (use 64 bytes' worth of elements for outputs).
template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& f, int64_t align = 1) {
  if (n <= 0) return;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
  if (chunks <= 1) {
    f(int64_t{0}, n);
    return;
  }
  auto boundary = [&](int64_t c) { return c == chunks ? n : n * c / chunks / align * align; };
#pragma omp parallel for num_threads(static_cast <int>(chunks)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = boundary(c), end = boundary(c + 1);
    if (begin < end) f(begin, end);
  }
}

}  // namespace nimbus::cpu
