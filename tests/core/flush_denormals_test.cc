// FlushDenormalsScope: subnormal floats read and come out as zero inside it, on the calling thread
// and in a kernel split over the compute pool, and are IEEE's again after it.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "nimbus/device/runtime.h"
#include "nimbus/nimbus.h"

namespace nimbus {
namespace {

// x * 1 for 2^20 copies of a subnormal: enough elements that the multiply forks the pool.
std::vector<float> times_one(float x) {
  const int64_t n = int64_t{1} << 20;
  const Tensor a = Tensor::from_vector<float>(std::vector<float>(static_cast<size_t>(n), x), {n});
  const Tensor ones = Tensor::from_vector<float>(std::vector<float>(static_cast<size_t>(n), 1.0f), {n});
  return (a * ones).to_vector<float>();
}

bool all_equal(const std::vector<float>& values, float x) {
  return std::all_of(values.begin(), values.end(), [x](float v) { return v == x; });
}

TEST(FlushDenormals, SubnormalsAreZeroInsideTheScopeOnEveryThreadAndBackAfter) {
  const float subnormal = 1e-39f;
  ASSERT_TRUE(all_equal(times_one(subnormal), subnormal));
  volatile float tiny = 1e-30f;  // volatile: computed at run time, under the thread's modes
  {
    const FlushDenormalsScope flush;
    EXPECT_TRUE(all_equal(times_one(subnormal), 0.0f));
    EXPECT_EQ(tiny * 1e-10f, 0.0f);  // a subnormal result flushes on the calling thread
  }
  EXPECT_TRUE(all_equal(times_one(subnormal), subnormal));
  EXPECT_GT(tiny * 1e-10f, 0.0f);
}

}  // namespace
}  // namespace nimbus
