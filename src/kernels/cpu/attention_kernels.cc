// FlashAttention on the CPU: scaled_dot_product_attention and its backward
// op for f32, f16 and bf16 (computed in f32), any sequence length, causal or
// with an additive mask.
//
//   forward   q (B,H,T,D), k (B,H,S,D), v (B,H,S,Dv) [, mask] -> out (B,H,T,Dv), lse (B,H,T)
//             One task per (batch x head, block of 64 query rows), tasks spread over the
//             threads. For each block of 64 keys (only those at or below the diagonal when
//             causal): scoresᵀ = k (scale q)ᵀ, keys down and queries across, so that the
//             queries' running max m and sum l update 16 queries per vector (online softmax)
//             and the accumulator rows are rescaled; acc += exp(scores - m) v. Then
//             out = acc / l and lse = m + log l: no (T x S) matrix exists.
//   backward  one task per (batch x head), so that the key and value gradients of a block
//             are summed by one thread without atomics. For each key block, for each query
//             block: p = exp(scores - lse), dp = grad_out vᵀ, ds = p (dp - delta) with
//             delta = rowsum(grad_out * out) - grad_lse; grad_v += pᵀ grad_out,
//             grad_k += dsᵀ (scale q), grad_q += ds k (scaled at the end).
//   causal    a block on the diagonal is half masked: both kernels run its products in bands
//             of 8 rows, each over the part its rows can see (whole vectors), about halving
//             the diagonal's work (two of the three block pairs of a 128-token head).
//
// The products run through one register-tiled loop, c (m x n) += a (m x k) b (k x n),
// with n a multiple of 16: blocks are copied to f32 scratch padded to 16 features (zeros),
// so every call is whole vectors (64-byte on AVX-512, 32-byte otherwise). Each call takes
// its scratch from the allocator, per thread the size attention_geometry.h states (the
// memory estimate counts the same), and returns it when done. With score_gradient (a mask that needs its gradient) the
// backward op goes to the reference kernel.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "nimbus/device/device.h"
#include "nimbus/ops/for_kernels/attention_geometry.h"
#include "nimbus/ops/registry.h"
#include "nimbus/tensor/storage.h"
#include "src/kernels/cpu/half_convert.h"
#include "src/kernels/cpu/simd.h"
#include "src/kernels/cpu/vector_math.h"

namespace nimbus::cpu {
namespace {

using internal::attention_padded;
using internal::AttentionGeometry;
using internal::kAttentionKeyBlock;
using internal::kAttentionQueryBlock;

// Rows per band of the products that follow a causal diagonal (each band to its last row's extent).
constexpr int64_t kAttentionBand = 8;
constexpr float kNegativeInfinity = -std::numeric_limits<float>::infinity();

// ---- the product: c (m x n) (+)= a (m x k) b (k x n), row-major, n a multiple of 16 ----
// With TransposedA, `a` holds aᵀ (k x m, row stride lda): the products with a block's transpose
// (pᵀ grad_out, dsᵀ q) read it in place instead of transposing it first.

template <typename V, int Rows, int Vectors, bool TransposedA>
NIMBUS_ALWAYS_INLINE void attention_gemm_tile(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                                              float* c, int64_t ldc, bool accumulate) {
  constexpr int64_t kLanes = simd::kLanesOf<V>;
  V acc[Rows][Vectors];
  for (int r = 0; r < Rows; ++r) {
    for (int x = 0; x < Vectors; ++x) acc[r][x] = accumulate ? simd::load<V>(c + r * ldc + x * kLanes) : V{};
  }
  for (int64_t p = 0; p < k; ++p) {
    V row[Vectors];
    for (int x = 0; x < Vectors; ++x) row[x] = simd::load<V>(b + p * ldb + x * kLanes);
    for (int r = 0; r < Rows; ++r) {
      const V scalar = simd::splat<V>(TransposedA ? a[p * lda + r] : a[r * lda + p]);
      for (int x = 0; x < Vectors; ++x) acc[r][x] += scalar * row[x];
    }
  }
  for (int r = 0; r < Rows; ++r) {
    for (int x = 0; x < Vectors; ++x) simd::store(c + r * ldc + x * kLanes, acc[r][x]);
  }
}

// Columns [0, Vectors x lanes) of c, Rows rows at a time.
template <typename V, int Rows, int Vectors, bool TransposedA>
NIMBUS_ALWAYS_INLINE void attention_gemm_panel(int64_t m, int64_t k, const float* a, int64_t lda, const float* b,
                                               int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  const int64_t row_step = TransposedA ? 1 : lda;
  int64_t i = 0;
  for (; i + Rows <= m; i += Rows) {
    attention_gemm_tile<V, Rows, Vectors, TransposedA>(k, a + i * row_step, lda, b, ldb, c + i * ldc, ldc, accumulate);
  }
  for (; i < m; ++i) {
    attention_gemm_tile<V, 1, Vectors, TransposedA>(k, a + i * row_step, lda, b, ldb, c + i * ldc, ldc, accumulate);
  }
}

// Panels of 4, 2 and 1 vectors, with as many rows as keep the accumulators within half the
// registers (AVX-512's 32, AVX2's 16): head sizes of 32 and 64 take the wider panels whole.
template <typename V, bool TransposedA = false>
NIMBUS_ALWAYS_INLINE void attention_gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                                         int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  constexpr int64_t kLanes = simd::kLanesOf<V>;
  constexpr bool kWide = kLanes == 16;
  int64_t j = 0;
  if constexpr (kWide) {
    for (; j + 4 * kLanes <= n; j += 4 * kLanes) {
      attention_gemm_panel<V, 4, 4, TransposedA>(m, k, a, lda, b + j, ldb, c + j, ldc, accumulate);
    }
  }
  for (; j + 2 * kLanes <= n; j += 2 * kLanes) {
    attention_gemm_panel<V, kWide ? 8 : 4, 2, TransposedA>(m, k, a, lda, b + j, ldb, c + j, ldc, accumulate);
  }
  for (; j < n; j += kLanes) {
    attention_gemm_panel<V, 8, 1, TransposedA>(m, k, a, lda, b + j, ldb, c + j, ldc, accumulate);
  }
}

// ---- moving blocks into f32 scratch ----

// rows x cols of `src` (row stride cols, dtype) into dst (row stride ld), times `factor`, zero-padded to ld.
NIMBUS_ALWAYS_INLINE void attention_load_rows(const void* src, DType dtype, int64_t rows, int64_t cols, float* dst,
                                              int64_t ld, float factor) {
  for (int64_t r = 0; r < rows; ++r) {
    float* out = dst + r * ld;
    if (dtype == DType::kF32) {
      // An inline loop, not memcpy: rows are a head's few features, where a call costs more than the copy.
      const float* in = static_cast<const float*>(src) + r * cols;
      for (int64_t c = 0; c < cols; ++c) out[c] = in[c] * factor;
    } else {
      widen(dtype, static_cast<const std::byte*>(src) + r * cols * dtype_size(dtype), out, cols);
      if (factor != 1.0f) {
        for (int64_t c = 0; c < cols; ++c) out[c] *= factor;
      }
    }
    std::fill(out + cols, out + ld, 0.0f);
  }
}

// The transpose of a (rows x cols, row stride lda) into t (cols x ld), zero beyond `rows` up to ld.
NIMBUS_ALWAYS_INLINE void attention_transpose(const float* a, int64_t rows, int64_t cols, int64_t lda, float* t,
                                              int64_t ld) {
  for (int64_t c = 0; c < cols; ++c) {
    float* out = t + c * ld;
    for (int64_t r = 0; r < rows; ++r) out[r] = a[r * lda + c];
    std::fill(out + rows, out + ld, 0.0f);
  }
}

// f32 rows (row stride ld) into dst (rows x cols, dtype), times `factor`.
void attention_store_rows(const float* src, int64_t ld, int64_t rows, int64_t cols, float factor, DType dtype,
                          void* dst) {
  if (dtype == DType::kF32) {
    for (int64_t r = 0; r < rows; ++r) {
      float* out = static_cast<float*>(dst) + r * cols;
      for (int64_t c = 0; c < cols; ++c) out[c] = src[r * ld + c] * factor;
    }
    return;
  }
  float row[1024];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c0 = 0; c0 < cols; c0 += 1024) {
      const int64_t n = std::min<int64_t>(1024, cols - c0);
      for (int64_t c = 0; c < n; ++c) row[c] = src[r * ld + c0 + c] * factor;
      narrow(row, dtype, static_cast<std::byte*>(dst) + (r * cols + c0) * dtype_size(dtype), n);
    }
  }
}

// Sets the scores of a (rows x keys) block to -inf where the mask or the causal rule forbids them and
// adds the mask; columns from `keys` to the block's width are padding (-inf).
template <typename T>
NIMBUS_ALWAYS_INLINE void attention_mask_scores(const AttentionGeometry& g, const T* mask, int64_t bh, int64_t i0,
                                                int64_t rows, int64_t j0, int64_t keys, float* scores) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = scores + r * kAttentionKeyBlock;
    if (mask != nullptr) {
      const T* mask_row = mask + g.mask_offset(bh, i0 + r) + j0;
      for (int64_t c = 0; c < keys; ++c) row[c] += static_cast<float>(mask_row[c]);
    }
    // Causal: key j0 + c is visible from query i0 + r iff c <= i0 + r - j0.
    const int64_t visible = g.causal ? std::clamp<int64_t>(i0 + r - j0 + 1, 0, keys) : keys;
    std::fill(row + visible, row + kAttentionKeyBlock, kNegativeInfinity);
  }
}

// e^x for the softmax's exponents (x <= 0 but for rounding): 0 below -87, where e^x is no normal f32,
// so that masked scores (-inf) never produce a subnormal, which costs this CPU family a slow microcode
// path per vector (a causal diagonal block is half masked); vector_math.h's single-scale exp elsewhere
// (2 ulp). NaN stays NaN.
template <typename V>
NIMBUS_ALWAYS_INLINE V attention_exp(V x) {
  constexpr float kLowest = -87.0f;
  const V e = vmath::exp_normal_range(simd::clamp_below(x, kLowest));
  return x < kLowest ? V{} : e;
}

// Calls task(t, scratch) for t in [0, tasks) over the compute pool, dynamically (causal tasks differ in
// work), each thread with its own `floats` of f32 scratch. The scratch is one allocator Storage for the
// call, taken before the threads start (an allocation failure must not leave an OpenMP region).
template <typename Task>
void attention_parallel(int64_t tasks, int64_t floats, const Task& task) {
  if (tasks <= 0) return;
  const int threads = omp_in_parallel() ? 1 : static_cast<int>(std::min<int64_t>(omp_get_max_threads(), tasks));
  Storage scratch(Device::cpu(), static_cast<size_t>(floats * threads) * sizeof(float));
  float* base = static_cast<float*>(scratch.data());
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t t = 0; t < tasks; ++t) task(t, base + floats * omp_get_thread_num());
}

// ---- forward ----

struct AttentionForwardCall {
  AttentionGeometry g;
  DType dtype;
  const void *q, *k, *v, *mask;
  void* out;
  float* lse;
};

// Sets the transposed scores of a (keys x rows) block to -inf where the mask or the causal rule forbids
// them and adds the mask; columns from `rows` to the block's width are padding (left as they are).
template <typename T>
NIMBUS_ALWAYS_INLINE void attention_mask_scores_transposed(const AttentionGeometry& g, const T* mask, int64_t bh,
                                                           int64_t i0, int64_t rows, int64_t j0, int64_t keys,
                                                           float* scores_t) {
  for (int64_t c = 0; c < keys; ++c) {
    float* column = scores_t + c * kAttentionQueryBlock;
    if (mask != nullptr) {
      for (int64_t r = 0; r < rows; ++r) column[r] += static_cast<float>(mask[g.mask_offset(bh, i0 + r) + j0 + c]);
    }
    // Causal: key j0 + c is visible from query i0 + r iff r >= j0 + c - i0.
    if (g.causal) std::fill(column, column + std::clamp<int64_t>(j0 + c - i0, 0, rows), kNegativeInfinity);
  }
}

template <typename V, typename Mask>
NIMBUS_ALWAYS_INLINE void attention_forward_block(const AttentionForwardCall& call, int64_t bh, int64_t i0,
                                                  float* scratch) {
  constexpr int64_t kLanes = simd::kLanesOf<V>;
  const AttentionGeometry& g = call.g;
  const int64_t d = g.head_size, dv = g.value_size, dvp = attention_padded(dv);
  const int64_t br = kAttentionQueryBlock, bc = kAttentionKeyBlock, rows = std::min(br, g.queries - i0);
  const size_t element = dtype_size(call.dtype);
  float* q_rows = scratch;               // br x d, scaled
  float* query_t = q_rows + br * d;      // d x br
  float* k_rows = query_t + d * br;      // bc x d
  float* v_block = k_rows + bc * d;      // bc x dvp
  float* scores_t = v_block + bc * dvp;  // bc x br: keys down, queries across
  float* acc = scores_t + bc * br;       // br x dvp
  float* row_max = acc + br * dvp;       // br each: the running max, sum and this block's rescale
  float* row_sum = row_max + br;
  float* rescale = row_sum + br;

  const auto* q = static_cast<const std::byte*>(call.q) + (bh * g.queries + i0) * d * element;
  attention_load_rows(q, call.dtype, rows, d, q_rows, d, static_cast<float>(g.scale));
  attention_transpose(q_rows, rows, d, d, query_t, br);
  std::fill(acc, acc + br * dvp, 0.0f);
  std::fill(row_max, row_max + br, kNegativeInfinity);
  std::fill(row_sum, row_sum + br, 0.0f);
  const int64_t key_end = g.causal ? std::min(g.keys, i0 + rows) : g.keys;
  for (int64_t j0 = 0; j0 < key_end; j0 += bc) {
    const int64_t keys = std::min(bc, g.keys - j0);
    attention_load_rows(static_cast<const std::byte*>(call.k) + (bh * g.keys + j0) * d * element, call.dtype, keys, d,
                        k_rows, d, 1.0f);
    attention_load_rows(static_cast<const std::byte*>(call.v) + (bh * g.keys + j0) * dv * element, call.dtype, keys, dv,
                        v_block, dvp, 1.0f);
    // scoresᵀ = k (scale q)ᵀ: the softmax over keys then runs down columns, 16 queries per vector. On a
    // causal diagonal a band of keys skips the whole vectors of queries before the first that sees it
    // (the mask then sets those scores to -inf).
    for (int64_t c0 = 0; c0 < keys; c0 += kAttentionBand) {
      const int64_t m = std::min(kAttentionBand, keys - c0);
      const int64_t first = g.causal ? std::clamp<int64_t>(j0 + c0 - i0, 0, br) / 16 * 16 : 0;
      attention_gemm<V>(m, br - first, d, k_rows + c0 * d, d, query_t + first, br, scores_t + c0 * br + first, br,
                        false);
    }
    attention_mask_scores_transposed(g, static_cast<const Mask*>(call.mask), bh, i0, rows, j0, keys, scores_t);
    for (int64_t x = 0; x < br; x += kLanes) {
      const V old_max = simd::load<V>(row_max + x);
      V max = old_max;
      for (int64_t c = 0; c < keys; ++c) {
        const V score = simd::load<V>(scores_t + c * br + x);
        max = max < score ? score : max;
      }
      // A query that has seen only masked keys keeps max -inf: shift by 0 so that exp gives 0, not NaN.
      const V shift = max == kNegativeInfinity ? V{} : max;
      V sum{};
      for (int64_t c = 0; c < keys; ++c) {
        const V e = attention_exp(simd::load<V>(scores_t + c * br + x) - shift);
        simd::store(scores_t + c * br + x, e);
        sum += e;
      }
      const V factor = attention_exp(old_max - shift);
      simd::store(rescale + x, factor);
      simd::store(row_sum + x, simd::load<V>(row_sum + x) * factor + sum);
      simd::store(row_max + x, max);
    }
    for (int64_t r = 0; r < rows; ++r) {
      if (rescale[r] == 1.0f) continue;
      const V factor = simd::splat<V>(rescale[r]);
      for (int64_t c = 0; c < dvp; c += kLanes)
        simd::store(acc + r * dvp + c, simd::load<V>(acc + r * dvp + c) * factor);
    }
    // acc += p v, p read as the transpose of scoresᵀ; a band of queries over the keys it sees.
    for (int64_t r0 = 0; r0 < rows; r0 += kAttentionBand) {
      const int64_t m = std::min(kAttentionBand, rows - r0);
      const int64_t seen = g.causal ? std::clamp<int64_t>(i0 + r0 + m - j0, 0, keys) : keys;
      attention_gemm<V, true>(m, dvp, seen, scores_t + r0, br, v_block, dvp, acc + r0 * dvp, dvp, true);
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float sum = row_sum[r];
    const float inverse = sum > 0 ? 1.0f / sum : 0.0f;
    for (int64_t c = 0; c < dv; ++c) acc[r * dvp + c] *= inverse;
    call.lse[bh * g.queries + i0 + r] = sum > 0 ? row_max[r] + std::log(sum) : kNegativeInfinity;
  }
  attention_store_rows(acc, dvp, rows, dv, 1.0f, call.dtype,
                       static_cast<std::byte*>(call.out) + (bh * g.queries + i0) * dv * element);
}

template <typename Mask>
NIMBUS_TARGET_AVX512 void attention_forward_block_avx512(const AttentionForwardCall& call, int64_t bh, int64_t i0,
                                                         float* scratch) {
  attention_forward_block<simd::Vec<float, 64>, Mask>(call, bh, i0, scratch);
}

template <typename Mask>
void run_attention_forward(const AttentionForwardCall& call) {
  const int64_t blocks = (call.g.queries + kAttentionQueryBlock - 1) / kAttentionQueryBlock;
  const bool wide = has_avx512();
  const int64_t floats = internal::attention_forward_scratch_floats(call.g.head_size, call.g.value_size);
  attention_parallel(call.g.batch_heads * blocks, floats, [&](int64_t task, float* scratch) {
    const int64_t bh = task / blocks, i0 = task % blocks * kAttentionQueryBlock;
    if (wide) {
      attention_forward_block_avx512<Mask>(call, bh, i0, scratch);
    } else {
      attention_forward_block<simd::Vec<float>, Mask>(call, bh, i0, scratch);
    }
  });
}

// ---- backward ----

struct AttentionBackwardCall {
  AttentionGeometry g;
  DType dtype;
  const void *grad_out, *q, *k, *v, *out, *mask;
  const float *lse, *grad_lse;
  void *grad_q, *grad_k, *grad_v;
};

template <typename V, typename Mask>
NIMBUS_ALWAYS_INLINE void attention_backward_slice(const AttentionBackwardCall& call, int64_t bh, float* scratch) {
  const AttentionGeometry& g = call.g;
  const int64_t d = g.head_size, dv = g.value_size, dp = attention_padded(d), dvp = attention_padded(dv);
  const int64_t br = kAttentionQueryBlock, bc = kAttentionKeyBlock, t = g.queries;
  const size_t element = dtype_size(call.dtype);
  float* k_block = scratch;                      // bc x dp
  float* key_t = k_block + bc * dp;              // d x bc
  float* value_t = key_t + d * bc;               // dv x bc
  float* grad_k = value_t + dv * bc;             // bc x dp
  float* grad_v = grad_k + bc * dp;              // bc x dvp
  float* q_block = grad_v + bc * dvp;            // br x dp, scaled
  float* grad_out = q_block + br * dp;           // br x dvp
  float* probabilities = grad_out + br * dvp;    // br x bc
  float* grad_scores = probabilities + br * bc;  // br x bc
  float* grad_q = grad_scores + br * bc;         // t x dp
  float* delta = grad_q + t * dp;
  float* lse = delta + t;

  const auto rows_of = [&](const void* base, int64_t sequence, int64_t first, int64_t width) {
    return static_cast<const std::byte*>(base) + (bh * sequence + first) * width * element;
  };

  // delta_i = grad_out_i · out_i - grad_lse_i; a row that attends to nothing (lse -inf) has p = 0.
  for (int64_t i0 = 0; i0 < t; i0 += br) {
    const int64_t rows = std::min(br, t - i0);
    attention_load_rows(rows_of(call.grad_out, t, i0, dv), call.dtype, rows, dv, grad_out, dvp, 1.0f);
    attention_load_rows(rows_of(call.out, t, i0, dv), call.dtype, rows, dv, grad_v, dvp, 1.0f);  // out, for now
    for (int64_t r = 0; r < rows; ++r) {
      float dot = 0;
      for (int64_t c = 0; c < dv; ++c) dot += grad_out[r * dvp + c] * grad_v[r * dvp + c];
      delta[i0 + r] = dot - call.grad_lse[bh * t + i0 + r];
      const float row_lse = call.lse[bh * t + i0 + r];
      // exp(score - lse) with lse = +inf gives 0 for every score: the row's probabilities vanish.
      lse[i0 + r] = row_lse == kNegativeInfinity ? std::numeric_limits<float>::infinity() : row_lse;
    }
  }
  std::fill(grad_q, grad_q + t * dp, 0.0f);

  for (int64_t j0 = 0; j0 < g.keys; j0 += bc) {
    const int64_t keys = std::min(bc, g.keys - j0);
    attention_load_rows(rows_of(call.k, g.keys, j0, d), call.dtype, keys, d, k_block, dp, 1.0f);
    std::fill(k_block + keys * dp, k_block + bc * dp, 0.0f);
    attention_transpose(k_block, keys, d, dp, key_t, bc);
    attention_load_rows(rows_of(call.v, g.keys, j0, dv), call.dtype, keys, dv, grad_v, dvp, 1.0f);
    attention_transpose(grad_v, keys, dv, dvp, value_t, bc);
    std::fill(grad_k, grad_k + bc * dp, 0.0f);
    std::fill(grad_v, grad_v + bc * dvp, 0.0f);
    // Causal: query blocks that end at or before key j0 see none of this block.
    const int64_t first_query = g.causal ? j0 / br * br : 0;
    for (int64_t i0 = first_query; i0 < t; i0 += br) {
      const int64_t rows = std::min(br, t - i0);
      attention_load_rows(rows_of(call.q, t, i0, d), call.dtype, rows, d, q_block, dp, static_cast<float>(g.scale));
      attention_load_rows(rows_of(call.grad_out, t, i0, dv), call.dtype, rows, dv, grad_out, dvp, 1.0f);
      // Query i0 + r sees keys j0 + c for c < visible(r): on a causal diagonal block the products run
      // over the visible part only, in bands of kAttentionBand rows (scores up to the band's last row,
      // whole vectors); everything outside is zero in p and ds.
      const auto visible = [&](int64_t r) { return g.causal ? std::clamp<int64_t>(i0 + r - j0 + 1, 0, keys) : keys; };
      const auto computed_columns = [&](int64_t r) { return attention_padded(visible(r)); };
      for (int64_t r0 = 0; r0 < rows; r0 += kAttentionBand) {
        const int64_t m = std::min(kAttentionBand, rows - r0), n = computed_columns(r0 + m - 1);
        attention_gemm<V>(m, n, d, q_block + r0 * dp, dp, key_t, bc, probabilities + r0 * bc, bc, false);
        attention_gemm<V>(m, n, dv, grad_out + r0 * dvp, dvp, value_t, bc, grad_scores + r0 * bc, bc, false);
      }
      attention_mask_scores(g, static_cast<const Mask*>(call.mask), bh, i0, rows, j0, keys, probabilities);
      for (int64_t r = 0; r < rows; ++r) {
        constexpr int64_t kLanes = simd::kLanesOf<V>;
        float *p = probabilities + r * bc, *ds = grad_scores + r * bc;
        const float row_lse = lse[i0 + r], row_delta = delta[i0 + r];
        const int64_t n = std::min(bc, computed_columns(r));
        for (int64_t c = 0; c < n; c += kLanes) {
          const V pv = attention_exp(simd::load<V>(p + c) - row_lse);
          simd::store(p + c, pv);
          simd::store(ds + c, pv * (simd::load<V>(ds + c) - row_delta));
        }
        std::fill(p + n, p + bc, 0.0f);
        std::fill(ds + n, ds + bc, 0.0f);
      }
      // pᵀ and dsᵀ read in place; key j0 + c gets nothing from the queries before the first that sees it.
      for (int64_t c0 = 0; c0 < keys; c0 += kAttentionBand) {
        const int64_t m = std::min(kAttentionBand, keys - c0);
        const int64_t first = g.causal ? std::clamp<int64_t>(j0 + c0 - i0, 0, rows) : 0;
        attention_gemm<V, true>(m, dvp, rows - first, probabilities + first * bc + c0, bc, grad_out + first * dvp, dvp,
                                grad_v + c0 * dvp, dvp, true);
        attention_gemm<V, true>(m, dp, rows - first, grad_scores + first * bc + c0, bc, q_block + first * dp, dp,
                                grad_k + c0 * dp, dp, true);
      }
      for (int64_t r0 = 0; r0 < rows; r0 += kAttentionBand) {
        const int64_t m = std::min(kAttentionBand, rows - r0);
        attention_gemm<V>(m, dp, visible(r0 + m - 1), grad_scores + r0 * bc, bc, k_block, dp, grad_q + (i0 + r0) * dp,
                          dp, true);
      }
    }
    attention_store_rows(grad_k, dp, keys, d, 1.0f, call.dtype,
                         static_cast<std::byte*>(call.grad_k) + (bh * g.keys + j0) * d * element);
    attention_store_rows(grad_v, dvp, keys, dv, 1.0f, call.dtype,
                         static_cast<std::byte*>(call.grad_v) + (bh * g.keys + j0) * dv * element);
  }
  attention_store_rows(grad_q, dp, t, d, static_cast<float>(g.scale), call.dtype,
                       static_cast<std::byte*>(call.grad_q) + bh * t * d * element);
}

template <typename Mask>
NIMBUS_TARGET_AVX512 void attention_backward_slice_avx512(const AttentionBackwardCall& call, int64_t bh,
                                                          float* scratch) {
  attention_backward_slice<simd::Vec<float, 64>, Mask>(call, bh, scratch);
}

template <typename Mask>
void run_attention_backward(const AttentionBackwardCall& call) {
  const bool wide = has_avx512();
  const int64_t floats =
      internal::attention_backward_scratch_floats(call.g.queries, call.g.head_size, call.g.value_size);
  attention_parallel(call.g.batch_heads, floats, [&](int64_t bh, float* scratch) {
    if (wide) {
      attention_backward_slice_avx512<Mask>(call, bh, scratch);
    } else {
      attention_backward_slice<simd::Vec<float>, Mask>(call, bh, scratch);
    }
  });
}

// Runs fn.template operator()<Mask>() with the mask's element type (its dtype is the inputs').
template <typename Fn>
void with_mask_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF16: return fn.template operator()<Half>();
    case DType::kBF16: return fn.template operator()<BFloat16>();
    default: return fn.template operator()<float>();
  }
}

const void* data_or_null(std::span<const Tensor> inputs, size_t index) {
  return index < inputs.size() ? inputs[index].raw_data() : nullptr;
}

const std::vector<DType> kAttentionDTypes = {DType::kF32, DType::kF16, DType::kBF16};

const bool kRegistered =
    register_kernel("scaled_dot_product_attention",
                    {.name = "vectorized",
                     .device = DeviceType::kCPU,
                     .dtypes = kAttentionDTypes,
                     .priority = 50,
                     .fn =
                         [](KernelContext& ctx) {
                           const AttentionForwardCall call{.g = AttentionGeometry(ctx, 0),
                                                           .dtype = ctx.inputs[0].dtype(),
                                                           .q = ctx.inputs[0].raw_data(),
                                                           .k = ctx.inputs[1].raw_data(),
                                                           .v = ctx.inputs[2].raw_data(),
                                                           .mask = data_or_null(ctx.inputs, 3),
                                                           .out = ctx.outputs[0].raw_data(),
                                                           .lse = static_cast<float*>(ctx.outputs[1].raw_data())};
                           with_mask_type(call.dtype, [&]<typename Mask>() { run_attention_forward<Mask>(call); });
                         }}) &&
    register_kernel("scaled_dot_product_attention_backward",
                    {.name = "vectorized",
                     .device = DeviceType::kCPU,
                     .dtypes = kAttentionDTypes,
                     .priority = 50,
                     .fn =
                         [](KernelContext& ctx) {
                           const AttentionBackwardCall call{
                               .g = AttentionGeometry(ctx, 1),
                               .dtype = ctx.inputs[1].dtype(),
                               .grad_out = ctx.inputs[0].raw_data(),
                               .q = ctx.inputs[1].raw_data(),
                               .k = ctx.inputs[2].raw_data(),
                               .v = ctx.inputs[3].raw_data(),
                               .out = ctx.inputs[4].raw_data(),
                               .mask = data_or_null(ctx.inputs, 7),
                               .lse = static_cast<const float*>(ctx.inputs[5].raw_data()),
                               .grad_lse = static_cast<const float*>(ctx.inputs[6].raw_data()),
                               .grad_q = ctx.outputs[0].raw_data(),
                               .grad_k = ctx.outputs[1].raw_data(),
                               .grad_v = ctx.outputs[2].raw_data()};
                           with_mask_type(call.dtype, [&]<typename Mask>() { run_attention_backward<Mask>(call); });
                         },
                     .supports = [](const KernelContext& ctx) { return ctx.outputs.size() == 3; }});

}  // namespace
}  // namespace nimbus::cpu
