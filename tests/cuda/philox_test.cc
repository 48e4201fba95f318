// The Philox header that CUDA's dropout kernel compiles (nimbus/base/philox.h)
// draws the CPU generator's numbers: dropout_mask on the GPU is the CPU's mask
// bit for bit only if philox_uniform_f32 equals rng.h's philox_uniform.
#include "nimbus/base/philox.h"

#include <gtest/gtest.h>

#include "nimbus/base/rng.h"

namespace nimbus {
namespace {

TEST(CudaPhilox, TheKernelsUniformsAreTheCpuGenerators) {
  int below_half = 0;
  for (const uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{0x9E3779B97F4A7C15}}) {
    for (uint64_t i = 0; i < 4096; ++i) {
      const float u = philox_uniform_f32(seed, (1ull << 40) + i);
      ASSERT_EQ(u, philox_uniform(seed, (1ull << 40) + i)) << "seed " << seed << ", number " << i;
      below_half += u < 0.5f;
    }
  }
  EXPECT_NEAR(below_half / (3.0 * 4096), 0.5, 0.03);  // uniform, not a constant
}

}  // namespace
}  // namespace nimbus
