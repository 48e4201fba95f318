// The sizes of a batched matmul op(A) @ op(B): M, N, K, the broadcast batch
// shape and where each batch's matrices start. Shared with the kernels (src/kernels/).
#pragma once

#include <fmt/format.h>

#include <cstdint>

#include "nimbus/base/error.h"
#include "nimbus/base/shape.h"

namespace nimbus::internal {

struct MatmulGeometry {
  MatmulGeometry(const Shape& a, const Shape& b, bool transpose_a, bool transpose_b) {
    if (a.rank() < 2 || b.rank() < 2) {
      throw InvalidArgument(
          fmt::format("matmul: operands need rank 2 or more, got {} and {}", a.to_string(), b.to_string()),
          "reshape a vector to (1, K) or (K, 1) first");
    }
    m = transpose_a ? a[-1] : a[-2];
    k = transpose_a ? a[-2] : a[-1];
    const int64_t k_b = transpose_b ? b[-1] : b[-2];
    n = transpose_b ? b[-2] : b[-1];
    if (k != k_b) {
      throw InvalidArgument(
          fmt::format("matmul: inner dimensions differ: a {}{} has K={}, b {}{} has K={}", a.to_string(),
                      transpose_a ? " (transposed)" : "", k, b.to_string(), transpose_b ? " (transposed)" : "", k_b),
          "the last axis of a must match the second-to-last of b; transpose_a / transpose_b flip them");
    }
    Shape a_batch(std::span<const int64_t>(a.begin(), static_cast<size_t>(a.rank() - 2)));
    Shape b_batch(std::span<const int64_t>(b.begin(), static_cast<size_t>(b.rank() - 2)));
    try {
      batch_shape = broadcast_shapes(a_batch, b_batch, "matmul");
    } catch (const InvalidArgument& e) {
      // broadcast_shapes saw only the batch axes; the caller needs the operands.
      throw InvalidArgument(fmt::format("matmul: the batch axes of a {} and b {} cannot be broadcast ({} vs {})",
                                        a.to_string(), b.to_string(), a_batch.to_string(), b_batch.to_string()),
                            e.hint());
    }
    batch = batch_shape.numel();
    a_batch_shape = a_batch;
    b_batch_shape = b_batch;
    output_shape = batch_shape;
    output_shape.push_back(m);
    output_shape.push_back(n);
  }

  // Element offset of batch `index`'s matrix in A (B), following broadcasting.
  int64_t a_batch_offset(int64_t index) const { return batch_offset(index, a_batch_shape) * m * k; }
  int64_t b_batch_offset(int64_t index) const { return batch_offset(index, b_batch_shape) * k * n; }

  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  Shape batch_shape, a_batch_shape, b_batch_shape, output_shape;

 private:
  int64_t batch_offset(int64_t index, const Shape& operand) const {
    // Walk the broadcast batch index back into the operand's own batch axes.
    int64_t offset = 0, stride = 1;
    for (int axis = batch_shape.rank() - 1; axis >= 0; --axis) {
      const int64_t dim = batch_shape.dims()[axis];
      const int64_t coordinate = index % dim;
      index /= dim;
      const int operand_axis = axis - (batch_shape.rank() - operand.rank());
      if (operand_axis < 0) continue;
      const int64_t operand_dim = operand.dims()[operand_axis];
      if (operand_dim != 1) offset += coordinate * stride;
      stride *= operand_dim;
    }
    return offset;
  }
};

}  // namespace nimbus::internal
