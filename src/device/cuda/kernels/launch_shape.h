// The launch shape our .cu kernels share: 256 threads a block, grid-stride
// loops, at most 32 blocks per SM (enough to fill it, few enough that each
// thread walks several elements).
#pragma once

#include <algorithm>
#include <cstdint>

namespace nimbus::cuda::kernels {

inline constexpr int kThreads = 256;

inline unsigned blocks_for(int64_t work, int sms) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, int64_t{32} * sms)));
}

}  // namespace nimbus::cuda::kernels
