// Launchers of src/device/cuda/kernels/attention_kernels.cu, compiled by nvcc:
// plain C++17 with the runtime's types, like kernels.h. FlashAttention's
// forward and backward for scaled_dot_product_attention (src/ops/attention.cc):
// q (B, H, T, D), k (B, H, S, D), v (B, H, S, Dv), an optional additive mask
// (B or 1, H or 1, T or 1, S) of the inputs' type, all contiguous; f32, bf16 or f16
// storage computed in f32; logsumexp and its gradient are f32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "src/device/cuda/kernels/kernels.h"

namespace nimbus::cuda::kernels {

// The largest D and Dv the kernels take (each thread keeps a row of D and Dv floats).
inline constexpr int64_t kAttentionMaxHeadSize = 128;

struct AttentionShape {
  int64_t batch = 0, heads = 0, queries = 0, keys = 0, head_size = 0, value_size = 0;
  int64_t mask_batch_stride = 0, mask_head_stride = 0, mask_query_stride = 0;  // 0 where the mask broadcasts
  float scale = 1;
  bool causal = false;
};

// out (B, H, T, Dv) and lse (B, H, T): -inf and zeros for a row that attends to nothing.
cudaError_t attention_forward(FloatType type, const void* q, const void* k, const void* v, const void* mask, void* out,
                              float* lse, const AttentionShape& shape, cudaStream_t stream);

// grad_q, grad_k, grad_v from grad_out, the forward's out and lse, and grad_lse; `delta` is scratch
// of B x H x T floats.
cudaError_t attention_backward(FloatType type, const void* grad_out, const void* q, const void* k, const void* v,
                               const void* mask, const void* out, const float* lse, const float* grad_lse, float* delta,
                               void* grad_q, void* grad_k, void* grad_v, const AttentionShape& shape,
                               cudaStream_t stream);

}  // namespace nimbus::cuda::kernels
