// Reductions and softmax give bit-identical results run to run and for any
// compute thread count: the vectorized kernels combine fixed-size blocks in a
// fixed order, never per-thread partial results.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <functional>

#include "nimbus/ops/creation.h"
#include "nimbus/ops/reduction.h"

namespace nimbus {
namespace {

// Sets the OpenMP pool size for the scope, restoring the previous one after.
class ThreadCountScope {
 public:
  explicit ThreadCountScope(int threads) : previous_(omp_get_max_threads()) { omp_set_num_threads(threads); }
  ~ThreadCountScope() { omp_set_num_threads(previous_); }
  ThreadCountScope(const ThreadCountScope&) = delete;
  ThreadCountScope& operator=(const ThreadCountScope&) = delete;

 private:
  int previous_;
};

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// Large enough for many blocks and for every thread to get work; odd sizes so blocks end mid-vector.
Tensor large_input() {
  Generator generator(2024);
  return random_normal({1031, 2053}, 0.5, 3.0, DType::kF32, Device::cpu(), &generator);
}

void expect_deterministic(const char* what, const std::function<Tensor(const Tensor&)>& op) {
  SCOPED_TRACE(what);
  const Tensor x = large_input();
  Tensor baseline;
  {
    ThreadCountScope threads(1);
    baseline = op(x);
  }
  for (int threads : {1, 2, 3}) {
    ThreadCountScope scope(threads);
    for (int run = 0; run < 3; ++run) {
      EXPECT_TRUE(bitwise_equal(op(x), baseline)) << threads << " threads, run " << run;
    }
  }
}

TEST(Determinism, SumAllAxes) {
  expect_deterministic("sum over all axes", [](const Tensor& x) { return sum(x); });
}

TEST(Determinism, SumLeadingAxis) {
  expect_deterministic("sum over axis 0", [](const Tensor& x) { return sum(x, {0}); });
}

TEST(Determinism, SumTrailingAxis) {
  expect_deterministic("sum over axis 1", [](const Tensor& x) { return sum(x, {1}); });
}

TEST(Determinism, MeanAllAxesAndLeading) {
  expect_deterministic("mean over all axes", [](const Tensor& x) { return mean(x); });
  expect_deterministic("mean over axis 0", [](const Tensor& x) { return mean(x, {0}); });
}

TEST(Determinism, Softmax) {
  expect_deterministic("softmax", [](const Tensor& x) { return softmax(x, -1); });
  expect_deterministic("log_softmax", [](const Tensor& x) { return log_softmax(x, -1); });
}

}  // namespace
}  // namespace nimbus
