// How a reduction maps input elements to outputs. Shared with the kernels (src/kernels/).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "nimbus/base/shape.h"

namespace nimbus::internal {

struct ReduceGeometry {
  ReduceGeometry(const Shape& input, std::span<const int64_t> axes, const char* op) {
    const std::vector<int> reduced = normalize_axes(axes, input.rank(), op);
    std::vector<bool> is_reduced(static_cast<size_t>(input.rank()), false);
    for (int axis : reduced) is_reduced[static_cast<size_t>(axis)] = true;
    for (int axis = 0; axis < input.rank(); ++axis) {
      const int64_t dim = input.dims()[axis];
      if (is_reduced[static_cast<size_t>(axis)]) {
        kept_shape.push_back(1);
        count *= dim;
      } else {
        kept_shape.push_back(dim);
        reduced_shape.push_back(dim);
      }
    }
  }

  Shape kept_shape;     // the reduced axes as size 1 (keepdims=true)
  Shape reduced_shape;  // the reduced axes removed (keepdims=false)
  int64_t count = 1;    // elements reduced into each output
};

// A shape seen as (outer, axis, inner) around one axis.
struct AxisSplit {
  AxisSplit(const Shape& shape, int axis) {
    for (int i = 0; i < shape.rank(); ++i) {
      const int64_t dim = shape.dims()[i];
      if (i < axis) {
        outer *= dim;
      } else if (i == axis) {
        this->axis = dim;
      } else {
        inner *= dim;
      }
    }
  }
  int64_t outer = 1;
  int64_t axis = 1;
  int64_t inner = 1;
};

}  // namespace nimbus::internal
