// Philox4x32-10's ten rounds (Salmon et al., SC'11; Random123's constants) as
// one header that both the C++ compiler and nvcc compile (C++17, no Nimbus
// types), so a CUDA kernel draws exactly the numbers the CPU does
// (nimbus/base/rng.h: philox4x32, philox_uniform).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define NIMBUS_HOST_DEVICE __host__ __device__
#else
#define NIMBUS_HOST_DEVICE
#endif

namespace nimbus {

struct PhiloxBlock {
  uint32_t words[4];
};

NIMBUS_HOST_DEVICE inline PhiloxBlock philox4x32_block(uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n1 = static_cast<uint32_t>(p1);
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    const uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {{c0, c1, c2, c3}};
}

// The i-th uniform float in [0, 1) of stream `seed` (24 random bits): rng.h's philox_uniform.
NIMBUS_HOST_DEVICE inline float philox_uniform_f32(uint64_t seed, uint64_t i) {
  const PhiloxBlock block = philox4x32_block(seed, 0, i >> 2);
  return static_cast<float>(block.words[i & 3] >> 8) * 0x1.0p-24f;
}

}  // namespace nimbus
