// The attributes of conv2d (and its backward and fused ops) and of the pooling
// ops, for tests that build calls by hand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nimbus/ops/attrs.h"

namespace nimbus::testing {

inline Attrs conv2d_attrs(const char* padding, std::vector<int64_t> strides, std::vector<int64_t> dilations,
                          int64_t groups, const char* data_format) {
  return Attrs{{"strides", std::move(strides)},
               {"padding", std::string(padding)},
               {"dilations", std::move(dilations)},
               {"groups", groups},
               {"data_format", std::string(data_format)}};
}

inline Attrs pool2d_attrs(std::vector<int64_t> pool_size, std::vector<int64_t> strides, const char* padding,
                          const char* data_format) {
  return Attrs{{"pool_size", std::move(pool_size)},
               {"strides", std::move(strides)},
               {"padding", std::string(padding)},
               {"data_format", std::string(data_format)}};
}

}  // namespace nimbus::testing
