// The all-reduce of MultiWorkerMirrored (MPI) timed over buffer sizes, next to
// the ring model the planner uses (plan::ring_allreduce_seconds: 2 (N - 1) / N x
// bytes / bandwidth, plus a fixed latency): the bandwidth and latency are fitted
// by least squares on the measured times up to 16 MiB, and each size's model error printed.
//
//   mpirun --oversubscribe -np 2 build/release/bench/bench_all_reduce [REPEATS]
//
// Rank 0 prints a table: bytes, measured median seconds, model seconds, error.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "nimbus/distribute/multi_worker.h"
#include "nimbus/plan/step_model.h"

using namespace nimbus;

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 20;
  const std::shared_ptr<distribute::Strategy> strategy = distribute::MultiWorkerMirrored();
  const int workers = strategy->num_workers();
  std::vector<double> sizes, medians;
  strategy->run([&](int) {
    distribute::Collectives& collectives = *distribute::current_replica()->collectives;
    for (size_t floats = size_t{1} << 12; floats <= size_t{1} << 23; floats <<= 1) {  // 16 KiB .. 32 MiB
      std::vector<float> buffer(floats, 1.0f);
      collectives.all_reduce(buffer, distribute::ReduceOp::kSum);  // warm-up: connections, pages
      std::vector<double> seconds;
      for (int r = 0; r < repeats; ++r) {
        collectives.barrier();
        const auto start = std::chrono::steady_clock::now();
        collectives.all_reduce(buffer, distribute::ReduceOp::kSum);
        seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      std::nth_element(seconds.begin(), seconds.begin() + repeats / 2, seconds.end());
      sizes.push_back(static_cast<double>(floats * sizeof(float)));
      medians.push_back(seconds[static_cast<size_t>(repeats / 2)]);
    }
  });
  if (!strategy->is_chief()) return 0;
  // Least squares on relative errors (weights 1 / t^2, so that small sizes count as much as large ones) for
  // t = latency + ring_bytes * seconds_per_byte, ring_bytes = ring_allreduce_seconds(bytes, N, 1 byte/s).
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  // Fitted up to 16 MiB: above, OpenMPI over loopback changes protocol (docs/performance.md) and the table
  // shows how far the straight line then is.
  constexpr double kFitUpTo = 16 << 20;
  for (size_t i = 0; i < sizes.size() && sizes[i] <= kFitUpTo; ++i) {
    const double w = 1.0 / (medians[i] * medians[i]);
    const double x = plan::ring_allreduce_seconds(sizes[i], workers, 1.0);
    sw += w;
    sx += w * x;
    sy += w * medians[i];
    sxx += w * x * x;
    sxy += w * x * medians[i];
  }
  const double slope = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);  // seconds per ring byte
  const double latency = std::max(0.0, (sy - slope * sx) / sw);
  const double bandwidth = 1.0 / slope;
  fmt::print("{} workers, median of {} all-reduces per size\n", workers, repeats);
  fmt::print("fitted bandwidth {:.2f} GB/s per direction, latency {:.1f} us\n", bandwidth / 1e9, latency * 1e6);
  fmt::print("{:>12} {:>14} {:>14} {:>8}\n", "bytes", "measured_ms", "model_ms", "error");
  double worst_fitted = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const double model = latency + plan::ring_allreduce_seconds(sizes[i], workers, bandwidth);
    const double error = (model - medians[i]) / medians[i];
    if (sizes[i] <= kFitUpTo) worst_fitted = std::max(worst_fitted, std::abs(error));
    fmt::print("{:>12.0f} {:>14.4f} {:>14.4f} {:>+7.0f}%\n", sizes[i], medians[i] * 1e3, model * 1e3, error * 100);
  }
  fmt::print("largest model error up to 16 MiB: {:.0f}%\n", worst_fitted * 100);
  return 0;
}
