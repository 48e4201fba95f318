// FlashAttention on CUDA (src/device/cuda/kernels/attention_kernels.h): the
// CPU kernel's algorithm (src/kernels/cpu/attention_kernels.cc) with one
// thread per row, written for clarity first.
//
// Launch shapes: a block of 64 threads per (64 rows, batch x head); the other
// side's rows pass through shared memory in tiles of 32 (f32, whatever the
// storage type), so each thread reads them from there.
//   forward:  a thread per query row: per key tile, the tile's scores, the
//             running max and sum rescaled once (online softmax), acc += p v.
//   backward: delta_i = grad_out_i · out_i - grad_lse_i (a thread per row); a
//             thread per key row sums grad_k and grad_v over the query tiles;
//             a thread per query row sums grad_q over the key tiles. Both
//             recompute p = exp(scale q kᵀ + mask - lse) and dp = grad_out vᵀ.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "src/device/cuda/kernels/attention_kernels.h"

namespace nimbus::cuda::kernels {
namespace {

constexpr int kRowsPerBlock = 64;
constexpr int kTile = 32;
constexpr int kMaxD = static_cast<int>(kAttentionMaxHeadSize);

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}

// The mask's value for query i, key j of slice bh, or 0 without a mask.
template <typename T>
__device__ __forceinline__ float mask_at(const T* mask, const AttentionShape& s, int64_t bh, int64_t i, int64_t j) {
  if (mask == nullptr) return 0.0f;
  const int64_t offset =
      bh / s.heads * s.mask_batch_stride + bh % s.heads * s.mask_head_stride + i * s.mask_query_stride + j;
  return to_float(mask[offset]);
}

// Copies rows [first, first + kTile) of a (rows x width) slice into a shared tile (zeros past the end).
template <typename T>
__device__ void load_tile(const T* src, int64_t rows, int64_t first, int64_t width, float* tile) {
  for (int64_t e = threadIdx.x; e < kTile * width; e += blockDim.x) {
    const int64_t row = first + e / width;
    tile[e] = row < rows ? to_float(src[row * width + e % width]) : 0.0f;
  }
}

template <typename T>
__global__ void attention_forward_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                         const T* __restrict__ mask, T* __restrict__ out, float* __restrict__ lse,
                                         AttentionShape s) {
  extern __shared__ float shared[];
  float* k_tile = shared;                        // kTile x D
  float* v_tile = shared + kTile * s.head_size;  // kTile x Dv
  const int64_t bh = blockIdx.y, i = int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.x;
  const int64_t d = s.head_size, dv = s.value_size;
  const bool active = i < s.queries;
  float q_row[kMaxD], acc[kMaxD];
  for (int64_t c = 0; c < d; ++c) q_row[c] = active ? to_float(q[(bh * s.queries + i) * d + c]) * s.scale : 0.0f;
  for (int64_t c = 0; c < dv; ++c) acc[c] = 0.0f;
  float row_max = -INFINITY, row_sum = 0.0f;
  const int64_t last_row = min(s.queries, int64_t{blockIdx.x + 1} * kRowsPerBlock);
  const int64_t key_end = s.causal ? min(s.keys, last_row) : s.keys;
  for (int64_t j0 = 0; j0 < key_end; j0 += kTile) {
    __syncthreads();
    load_tile(k + bh * s.keys * d, s.keys, j0, d, k_tile);
    load_tile(v + bh * s.keys * dv, s.keys, j0, dv, v_tile);
    __syncthreads();
    if (!active) continue;
    float scores[kTile];
    float tile_max = -INFINITY;
    for (int j = 0; j < kTile; ++j) {
      const int64_t key = j0 + j;
      float score = -INFINITY;
      if (key < s.keys && !(s.causal && key > i)) {
        score = 0.0f;
        for (int64_t c = 0; c < d; ++c) score += q_row[c] * k_tile[j * d + c];
        score += mask_at(mask, s, bh, i, key);
      }
      scores[j] = score;
      tile_max = fmaxf(tile_max, score);
    }
    const float new_max = fmaxf(row_max, tile_max);
    const float shift = new_max == -INFINITY ? 0.0f : new_max;  // no key seen yet: exp gives 0, not NaN
    const float rescale = __expf(row_max - shift);
    row_sum *= rescale;
    for (int64_t c = 0; c < dv; ++c) acc[c] *= rescale;
    for (int j = 0; j < kTile; ++j) {
      const float p = __expf(scores[j] - shift);
      row_sum += p;
      for (int64_t c = 0; c < dv; ++c) acc[c] += p * v_tile[j * dv + c];
    }
    row_max = new_max;
  }
  if (!active) return;
  const float inverse = row_sum > 0 ? 1.0f / row_sum : 0.0f;
  for (int64_t c = 0; c < dv; ++c) out[(bh * s.queries + i) * dv + c] = from_float<T>(acc[c] * inverse);
  lse[bh * s.queries + i] = row_sum > 0 ? row_max + logf(row_sum) : -INFINITY;
}

template <typename T>
__global__ void attention_delta_kernel(const T* __restrict__ grad_out, const T* __restrict__ out,
                                       const float* __restrict__ grad_lse, float* __restrict__ delta, int64_t rows,
                                       int64_t dv) {
  for (int64_t r = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; r < rows; r += int64_t{gridDim.x} * blockDim.x) {
    float dot = 0.0f;
    for (int64_t c = 0; c < dv; ++c) dot += to_float(grad_out[r * dv + c]) * to_float(out[r * dv + c]);
    delta[r] = dot - grad_lse[r];
  }
}

// p and ds of (query i, key j) from the row's q (scaled), grad_out and the key's k and v.
struct ScoreGradient {
  float p, ds;
};
__device__ __forceinline__ ScoreGradient score_gradient(const float* q_scaled, const float* grad_out, const float* key,
                                                        const float* value, float mask, float row_lse, float row_delta,
                                                        int64_t d, int64_t dv) {
  if (row_lse == -INFINITY) return {0.0f, 0.0f};
  float score = mask, dp = 0.0f;
  for (int64_t c = 0; c < d; ++c) score += q_scaled[c] * key[c];
  for (int64_t c = 0; c < dv; ++c) dp += grad_out[c] * value[c];
  const float p = __expf(score - row_lse);
  return {p, p * (dp - row_delta)};
}

// A thread per key row j: grad_k_j = scale Σ_i ds_ij q_i, grad_v_j = Σ_i p_ij grad_out_i.
template <typename T>
__global__ void attention_grad_kv_kernel(const T* __restrict__ grad_out, const T* __restrict__ q,
                                         const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ mask,
                                         const float* __restrict__ lse, const float* __restrict__ delta,
                                         T* __restrict__ grad_k, T* __restrict__ grad_v, AttentionShape s) {
  extern __shared__ float shared[];
  float* q_tile = shared;                        // kTile x D, scaled
  float* g_tile = shared + kTile * s.head_size;  // kTile x Dv
  float* stats = g_tile + kTile * s.value_size;  // lse, delta: 2 x kTile
  const int64_t bh = blockIdx.y, j = int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.x;
  const int64_t d = s.head_size, dv = s.value_size;
  const bool active = j < s.keys;
  float key[kMaxD], value[kMaxD], dk[kMaxD], dvv[kMaxD];
  for (int64_t c = 0; c < d; ++c) {
    key[c] = active ? to_float(k[(bh * s.keys + j) * d + c]) : 0.0f;
    dk[c] = 0.0f;
  }
  for (int64_t c = 0; c < dv; ++c) {
    value[c] = active ? to_float(v[(bh * s.keys + j) * dv + c]) : 0.0f;
    dvv[c] = 0.0f;
  }
  // Causal: queries before the block's first key see none of its keys.
  const int64_t first_query = s.causal ? int64_t{blockIdx.x} * kRowsPerBlock / kTile * kTile : 0;
  for (int64_t i0 = first_query; i0 < s.queries; i0 += kTile) {
    __syncthreads();
    load_tile(q + bh * s.queries * d, s.queries, i0, d, q_tile);
    load_tile(grad_out + bh * s.queries * dv, s.queries, i0, dv, g_tile);
    for (int r = threadIdx.x; r < kTile; r += blockDim.x) {
      const bool row = i0 + r < s.queries;
      stats[r] = row ? lse[bh * s.queries + i0 + r] : -INFINITY;
      stats[kTile + r] = row ? delta[bh * s.queries + i0 + r] : 0.0f;
    }
    __syncthreads();
    if (!active) continue;
    for (int r = 0; r < kTile; ++r) {
      const int64_t i = i0 + r;
      if (i >= s.queries || (s.causal && j > i)) continue;
      float q_scaled[kMaxD];
      for (int64_t c = 0; c < d; ++c) q_scaled[c] = q_tile[r * d + c] * s.scale;
      const ScoreGradient g = score_gradient(q_scaled, g_tile + r * dv, key, value, mask_at(mask, s, bh, i, j),
                                             stats[r], stats[kTile + r], d, dv);
      for (int64_t c = 0; c < d; ++c) dk[c] += g.ds * q_scaled[c];
      for (int64_t c = 0; c < dv; ++c) dvv[c] += g.p * g_tile[r * dv + c];
    }
  }
  if (!active) return;
  for (int64_t c = 0; c < d; ++c) grad_k[(bh * s.keys + j) * d + c] = from_float<T>(dk[c]);
  for (int64_t c = 0; c < dv; ++c) grad_v[(bh * s.keys + j) * dv + c] = from_float<T>(dvv[c]);
}

// A thread per query row i: grad_q_i = scale Σ_j ds_ij k_j.
template <typename T>
__global__ void attention_grad_q_kernel(const T* __restrict__ grad_out, const T* __restrict__ q,
                                        const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ mask,
                                        const float* __restrict__ lse, const float* __restrict__ delta,
                                        T* __restrict__ grad_q, AttentionShape s) {
  extern __shared__ float shared[];
  float* k_tile = shared;                        // kTile x D
  float* v_tile = shared + kTile * s.head_size;  // kTile x Dv
  const int64_t bh = blockIdx.y, i = int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.x;
  const int64_t d = s.head_size, dv = s.value_size;
  const bool active = i < s.queries;
  float q_scaled[kMaxD], g_row[kMaxD], dq[kMaxD];
  for (int64_t c = 0; c < d; ++c) {
    q_scaled[c] = active ? to_float(q[(bh * s.queries + i) * d + c]) * s.scale : 0.0f;
    dq[c] = 0.0f;
  }
  for (int64_t c = 0; c < dv; ++c) g_row[c] = active ? to_float(grad_out[(bh * s.queries + i) * dv + c]) : 0.0f;
  const float row_lse = active ? lse[bh * s.queries + i] : -INFINITY;
  const float row_delta = active ? delta[bh * s.queries + i] : 0.0f;
  const int64_t last_row = min(s.queries, int64_t{blockIdx.x + 1} * kRowsPerBlock);
  const int64_t key_end = s.causal ? min(s.keys, last_row) : s.keys;
  for (int64_t j0 = 0; j0 < key_end; j0 += kTile) {
    __syncthreads();
    load_tile(k + bh * s.keys * d, s.keys, j0, d, k_tile);
    load_tile(v + bh * s.keys * dv, s.keys, j0, dv, v_tile);
    __syncthreads();
    if (!active) continue;
    for (int j = 0; j < kTile; ++j) {
      const int64_t key = j0 + j;
      if (key >= s.keys || (s.causal && key > i)) continue;
      const ScoreGradient g = score_gradient(q_scaled, g_row, k_tile + j * d, v_tile + j * dv,
                                             mask_at(mask, s, bh, i, key), row_lse, row_delta, d, dv);
      for (int64_t c = 0; c < d; ++c) dq[c] += g.ds * k_tile[j * d + c];
    }
  }
  if (!active) return;
  for (int64_t c = 0; c < d; ++c) grad_q[(bh * s.queries + i) * d + c] = from_float<T>(dq[c] * s.scale);
}

dim3 row_grid(int64_t rows, int64_t batch_heads) {
  return dim3(static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock), static_cast<unsigned>(batch_heads));
}

template <typename T>
cudaError_t launch_forward(const void* q, const void* k, const void* v, const void* mask, void* out, float* lse,
                           const AttentionShape& s, cudaStream_t stream) {
  const size_t shared = sizeof(float) * kTile * static_cast<size_t>(s.head_size + s.value_size);
  attention_forward_kernel<T><<<row_grid(s.queries, s.batch * s.heads), kRowsPerBlock, shared, stream>>>(
      static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), static_cast<const T*>(mask),
      static_cast<T*>(out), lse, s);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_backward(const void* grad_out, const void* q, const void* k, const void* v, const void* mask,
                            const void* out, const float* lse, const float* grad_lse, float* delta, void* grad_q,
                            void* grad_k, void* grad_v, const AttentionShape& s, cudaStream_t stream) {
  const int64_t rows = s.batch * s.heads * s.queries;
  attention_delta_kernel<T><<<static_cast<unsigned>((rows + 255) / 256), 256, 0, stream>>>(
      static_cast<const T*>(grad_out), static_cast<const T*>(out), grad_lse, delta, rows, s.value_size);
  const size_t tiles = sizeof(float) * kTile * static_cast<size_t>(s.head_size + s.value_size);
  attention_grad_kv_kernel<T>
      <<<row_grid(s.keys, s.batch * s.heads), kRowsPerBlock, tiles + 2 * kTile * sizeof(float), stream>>>(
          static_cast<const T*>(grad_out), static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
          static_cast<const T*>(mask), lse, delta, static_cast<T*>(grad_k), static_cast<T*>(grad_v), s);
  attention_grad_q_kernel<T><<<row_grid(s.queries, s.batch * s.heads), kRowsPerBlock, tiles, stream>>>(
      static_cast<const T*>(grad_out), static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
      static_cast<const T*>(mask), lse, delta, static_cast<T*>(grad_q), s);
  return cudaGetLastError();
}

}  // namespace

cudaError_t attention_forward(FloatType type, const void* q, const void* k, const void* v, const void* mask, void* out,
                              float* lse, const AttentionShape& shape, cudaStream_t stream) {
  switch (type) {
    case FloatType::kBF16: return launch_forward<__nv_bfloat16>(q, k, v, mask, out, lse, shape, stream);
    case FloatType::kF16: return launch_forward<__half>(q, k, v, mask, out, lse, shape, stream);
    default: return launch_forward<float>(q, k, v, mask, out, lse, shape, stream);
  }
}

cudaError_t attention_backward(FloatType type, const void* grad_out, const void* q, const void* k, const void* v,
                               const void* mask, const void* out, const float* lse, const float* grad_lse, float* delta,
                               void* grad_q, void* grad_k, void* grad_v, const AttentionShape& shape,
                               cudaStream_t stream) {
  switch (type) {
    case FloatType::kBF16:
      return launch_backward<__nv_bfloat16>(grad_out, q, k, v, mask, out, lse, grad_lse, delta, grad_q, grad_k, grad_v,
                                            shape, stream);
    case FloatType::kF16:
      return launch_backward<__half>(grad_out, q, k, v, mask, out, lse, grad_lse, delta, grad_q, grad_k, grad_v, shape,
                                     stream);
    default:
      return launch_backward<float>(grad_out, q, k, v, mask, out, lse, grad_lse, delta, grad_q, grad_k, grad_v, shape,
                                    stream);
  }
}

}  // namespace nimbus::cuda::kernels
