#include "src/kernels/cpu/simd.h"

#include <atomic>

namespace nimbus::cpu {
namespace {

std::atomic<int> vector_bytes_limit{0};

bool cpu_has_avx512() {
#if defined(__x86_64__)
  // libgcc checks the CPUID bits and that the OS saves the AVX-512 registers.
  static const bool supported = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                                __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return supported;
#else
  return false;
#endif
}

}  // namespace

bool has_avx512() {
  const int limit = vector_bytes_limit.load(std::memory_order_relaxed);
  return cpu_has_avx512() && (limit == 0 || limit >= 64);
}

void limit_vector_bytes(int bytes) { vector_bytes_limit.store(bytes, std::memory_order_relaxed); }

}  // namespace nimbus::cpu
