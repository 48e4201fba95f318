// The sizes of a scaled_dot_product_attention call (forward or backward),
// and the CPU kernel's blocks and per-thread scratch, which the graph's
// memory estimate counts. Shared with the kernels (src/kernels/).
#pragma once

#include <algorithm>
#include <cstdint>

#include "nimbus/ops/op_schema.h"

namespace nimbus::internal {

struct AttentionGeometry {
  // `first` is the index of q among the call's inputs: 0 forward, 1 backward (after grad_out).
  AttentionGeometry(const KernelContext& ctx, int first) {
    const Shape &q = ctx.inputs[static_cast<size_t>(first)].shape(),
                &v = ctx.inputs[static_cast<size_t>(first + 2)].shape();
    batch_heads = q[0] * q[1];
    heads = q[1];
    queries = q[2];
    keys = v[2];
    head_size = q[3];
    value_size = v[3];
    scale = ctx.attrs.get_float("scale");
    causal = ctx.attrs.get_bool("causal");
    const size_t mask_index = static_cast<size_t>(first + 3 + (first == 1 ? 3 : 0));
    if (ctx.inputs.size() > mask_index) {
      const Shape& mask = ctx.inputs[mask_index].shape();
      // Contiguous (B or 1, H or 1, T or 1, S): a size-1 axis has stride 0.
      mask_query_stride = mask[2] == 1 ? 0 : keys;
      mask_head_stride = mask[1] == 1 ? 0 : mask[2] * keys;
      mask_batch_stride = mask[0] == 1 ? 0 : mask[1] * mask[2] * keys;
    }
  }

  // Where the mask row of query i of (batch x heads) slice bh starts.
  int64_t mask_offset(int64_t bh, int64_t i) const {
    return bh / heads * mask_batch_stride + bh % heads * mask_head_stride + i * mask_query_stride;
  }

  int64_t batch_heads = 0, heads = 0, queries = 0, keys = 0, head_size = 0, value_size = 0;
  int64_t mask_batch_stride = 0, mask_head_stride = 0, mask_query_stride = 0;  // 0 where the mask broadcasts
  double scale = 1;
  bool causal = false;
};

// The CPU kernel's tiles: query rows and keys per block, and the padding of a row of
// features (a multiple of the widest vector, 16 f32).
inline constexpr int64_t kAttentionQueryBlock = 64;
inline constexpr int64_t kAttentionKeyBlock = 64;
inline int64_t attention_padded(int64_t features) { return (features + 15) / 16 * 16; }

// f32 elements of one thread's scratch in the CPU kernel. Forward: a query block and its transpose, a
// key block, a value block, the block's transposed scores and output accumulator, and the rows' max,
// sum and rescale. Backward: a key block and its transpose, the transposed value block, gradients of the
// key and value blocks, a query and an output-gradient block, the scores and their gradient, and the
// whole slice's query gradient and row statistics (linear in T).
inline int64_t attention_forward_scratch_floats(int64_t head_size, int64_t value_size) {
  const int64_t br = kAttentionQueryBlock, bc = kAttentionKeyBlock, dv = attention_padded(value_size);
  return 2 * br * head_size + bc * head_size + bc * dv + bc * br + br * dv + 3 * br;
}
inline int64_t attention_backward_scratch_floats(int64_t queries, int64_t head_size, int64_t value_size) {
  const int64_t br = kAttentionQueryBlock, bc = kAttentionKeyBlock;
  const int64_t d = attention_padded(head_size), dv = attention_padded(value_size);
  return bc * d + head_size * bc + value_size * bc + bc * d + bc * dv + br * d + br * dv + 2 * br * bc + queries * d +
         2 * queries;
}

}  // namespace nimbus::internal
