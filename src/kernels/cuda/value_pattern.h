// A scalar attribute (fill's and pad's `value`) as the bytes of one element of
// `dtype`, converted on the host exactly as the CPU reference converts it, for
// kernels that write raw words of any dtype.
#pragma once

#include <cstdint>
#include <cstring>

#include "nimbus/base/dtype.h"

namespace nimbus::cuda {

inline uint64_t value_pattern(DType dtype, double value) {
  uint64_t pattern = 0;
  visit_dtype(dtype, [&]<typename T>() {
    const T converted = from_double<T>(value);
    static_assert(sizeof(T) <= sizeof(pattern));
    std::memcpy(&pattern, &converted, sizeof(T));
  });
  return pattern;
}

}  // namespace nimbus::cuda
