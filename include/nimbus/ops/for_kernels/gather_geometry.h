// How gather and scatter_add lay out their operands, shared by the reference
// kernels and the fast CPU kernels. Shared with the kernels (src/kernels/).
//
// gather reads, and scatter_add writes, an operand seen as (outer, axis, inner)
// through indices flattened to (count):
//   gathered (outer, count, inner)[o, n, i] <-> operand (outer, axis, inner)[o, indices[n], i]
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <vector>

#include "nimbus/base/error.h"
#include "nimbus/base/shape.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus::internal {

// operand.shape[:axis] + indices.shape + operand.shape[axis+1:]; `axis` is normalized.
inline Shape gathered_shape(const Shape& operand, const Shape& indices, int axis) {
  Shape result;
  for (int d = 0; d < axis; ++d) result.push_back(operand.dims()[d]);
  for (int64_t dim : indices.dims()) result.push_back(dim);
  for (int d = axis + 1; d < operand.rank(); ++d) result.push_back(operand.dims()[d]);
  return result;
}

// "[1, 2]": where flat element `flat` of `shape` sits.
inline std::string position_string(int64_t flat, const Shape& shape) {
  std::vector<int64_t> coordinate(static_cast<size_t>(shape.rank()));
  for (int d = shape.rank() - 1; d >= 0; --d) {
    coordinate[static_cast<size_t>(d)] = flat % shape.dims()[d];
    flat /= shape.dims()[d];
  }
  return fmt::format("[{}]", fmt::join(coordinate, ", "));
}

// The indices (i32 or i64) as i64, each checked to lie in [0, operand.shape[axis]).
// A bad index is the caller's data, not a bug: InvalidArgument naming the op,
// the index's position and value, and the valid range (as TensorFlow reports it).
inline std::vector<int64_t> checked_indices(const char* op, const Tensor& indices, const Shape& operand, int axis) {
  const int64_t limit = operand.dims()[axis];
  std::vector<int64_t> result(static_cast<size_t>(indices.numel()));
  for (size_t n = 0; n < result.size(); ++n) {
    result[n] = indices.dtype() == DType::kI32 ? static_cast<const int32_t*>(indices.raw_data())[n]
                                               : static_cast<const int64_t*>(indices.raw_data())[n];
    if (result[n] < 0 || result[n] >= limit) {
      throw InvalidArgument(fmt::format("{}: indices{} = {} is not in [0, {}): axis {} of {} has {} entries", op,
                                        position_string(static_cast<int64_t>(n), indices.shape()), result[n], limit,
                                        axis, operand.to_string(), limit));
    }
  }
  return result;
}

}  // namespace nimbus::internal
