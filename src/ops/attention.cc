// Scaled dot-product attention as one op, softmax(q kᵀ · scale + mask) v,
// and its backward op. Outputs are the attention and, per query row, the
// logsumexp of its scores: the only statistic the backward pass needs to
// recompute the probabilities (FlashAttention), so no (T × S) matrix is kept.
// The reference kernels are plain loops in double; the fast CPU kernel is
// src/kernels/cpu/attention_kernels.cc.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <vector>

#include "nimbus/base/error.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/for_kernels/attention_geometry.h"
#include "nimbus/ops/for_kernels/elementwise_defs.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/registry.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus {
namespace {

using internal::AttentionGeometry;

// Shapes: q (B, H, T, D), k (B, H, S, D), v (B, H, S, Dv) from input `first` on, and a mask
// (B or 1, H or 1, T or 1, S) at `mask_index` when the call has that many inputs.
void check_attention_inputs(const InferContext& ctx, int first, int mask_index) {
  const int count = static_cast<int>(ctx.inputs.size());
  if (count != mask_index && count != mask_index + 1) {
    ctx.fail(fmt::format("takes {} inputs, or {} with a mask; got {}", mask_index, mask_index + 1, count));
  }
  const int indices[] = {first, first + 1, first + 2, mask_index};
  const auto input = [&](int i) -> const TensorSpec& { return ctx.inputs[static_cast<size_t>(indices[i])]; };
  const char* names[] = {"q", "k", "v", "mask"};
  const int tensors = count > mask_index ? 4 : 3;
  ctx.expect_floating(first);
  for (int i = 0; i < tensors; ++i) {
    ctx.expect_same_dtype(first, indices[i]);
    if (input(i).shape.rank() != 4) {
      ctx.fail(fmt::format("{} has shape {}; attention needs rank 4: (batch, heads, sequence, features)", names[i],
                           input(i).shape.to_string()),
               "MultiHeadAttention's projections are (batch, heads, sequence, head size)");
    }
  }
  const Shape &q = input(0).shape, &k = input(1).shape, &v = input(2).shape;
  if (k[0] != q[0] || k[1] != q[1] || v[0] != q[0] || v[1] != q[1] || k[3] != q[3] || v[2] != k[2]) {
    ctx.fail(fmt::format("q {}, k {} and v {} must be (B, H, T, D), (B, H, S, D) and (B, H, S, Dv)", q.to_string(),
                         k.to_string(), v.to_string()));
  }
  if (tensors == 4) {
    const Shape& mask = input(3).shape;
    const bool batch_ok = mask[0] == 1 || mask[0] == q[0], heads_ok = mask[1] == 1 || mask[1] == q[1];
    if (!batch_ok || !heads_ok || (mask[2] != 1 && mask[2] != q[2]) || mask[3] != k[2]) {
      ctx.fail(fmt::format("mask has shape {}; for q {} and k {} it must be ({} or 1, {} or 1, {} or 1, {})",
                           mask.to_string(), q.to_string(), k.to_string(), q[0], q[1], q[2], k[2]));
    }
  }
}

// The logsumexp rows are f64 for f64 inputs and f32 otherwise (16-bit inputs accumulate in f32).
DType statistic_dtype(DType dtype) { return dtype == DType::kF64 ? DType::kF64 : DType::kF32; }

// One query row's scores, recomputed in double: scale q_i · k_j + mask, -inf where masked or causal.
template <typename T>
void row_scores(const AttentionGeometry& g, const T* q, const T* k, const T* mask, int64_t bh, int64_t i,
                std::vector<double>& scores) {
  const T* qi = q + (bh * g.queries + i) * g.head_size;
  for (int64_t j = 0; j < g.keys; ++j) {
    if (g.causal && j > i) {
      scores[static_cast<size_t>(j)] = -std::numeric_limits<double>::infinity();
      continue;
    }
    const T* kj = k + (bh * g.keys + j) * g.head_size;
    double dot = 0;
    for (int64_t d = 0; d < g.head_size; ++d) dot += to_double(qi[d]) * to_double(kj[d]);
    scores[static_cast<size_t>(j)] = dot * g.scale + (mask != nullptr ? to_double(mask[g.mask_offset(bh, i) + j]) : 0);
  }
}

template <typename T>
const T* data_or_null(std::span<const Tensor> inputs, size_t index) {
  return index < inputs.size() ? static_cast<const T*>(inputs[index].raw_data()) : nullptr;
}

// ---- scaled_dot_product_attention_backward ----

const OpSchema& kAttentionBackward = define_op({
    .name = "scaled_dot_product_attention_backward",
    .summary = "gradients (q, k, v[, scores]) of scaled_dot_product_attention from (grad_out, q, k, v, out, "
               "logsumexp, grad_logsumexp[, mask]), recomputing the scores",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kComputeDType,
    .num_inputs = 7,
    .variadic_inputs = true,
    .infer =
        [](const InferContext& ctx) {
          check_attention_inputs(ctx, 1, 7);
          const TensorSpec &q = ctx.inputs[1], &k = ctx.inputs[2], &v = ctx.inputs[3];
          const Shape out_shape{q.shape[0], q.shape[1], q.shape[2], v.shape[3]};
          const Shape rows{q.shape[0], q.shape[1], q.shape[2]};
          for (int i : {0, 4}) {
            ctx.expect_same_dtype(1, i);
            if (ctx.inputs[static_cast<size_t>(i)].shape != out_shape) {
              ctx.fail(fmt::format("{} has shape {}, the attention's output is {}", i == 0 ? "grad_out" : "out",
                                   ctx.inputs[static_cast<size_t>(i)].shape.to_string(), out_shape.to_string()));
            }
          }
          for (int i : {5, 6}) {
            ctx.expect_dtype(i, {statistic_dtype(q.dtype)});
            if (ctx.inputs[static_cast<size_t>(i)].shape != rows) {
              ctx.fail(fmt::format("{} has shape {}, it needs one value per query row: {}",
                                   i == 5 ? "logsumexp" : "grad_logsumexp",
                                   ctx.inputs[static_cast<size_t>(i)].shape.to_string(), rows.to_string()));
            }
          }
          std::vector<TensorSpec> grads = {q, k, v};
          if (ctx.attrs.get_bool("score_gradient")) {
            grads.push_back({Shape{q.shape[0], q.shape[1], q.shape[2], k.shape[2]}, q.dtype});
          }
          return grads;
        },
    .differentiable = false,
    .dispatch_input = 1,
});

// Per query row i, with p_j = exp(s_j - lse_i) and dp_j = grad_out_i · v_j:
//   ds_j = p_j (dp_j - (grad_out_i · out_i - grad_lse_i)),
//   grad_q_i = scale Σ_j ds_j k_j, grad_k_j += scale ds_j q_i, grad_v_j += p_j grad_out_i.
const bool kAttentionBackwardReference = register_kernel(
    "scaled_dot_product_attention_backward",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(internal::kFloatingDTypes), .fn = [](KernelContext& ctx) {
       const AttentionGeometry g(ctx, 1);
       visit_dtype(ctx.inputs[1].dtype(), [&]<typename T>() {
         using Stat = std::conditional_t<std::is_same_v<T, double>, double, float>;
         const T *grad_out = data_or_null<T>(ctx.inputs, 0), *q = data_or_null<T>(ctx.inputs, 1),
                 *k = data_or_null<T>(ctx.inputs, 2), *v = data_or_null<T>(ctx.inputs, 3),
                 *out = data_or_null<T>(ctx.inputs, 4), *mask = data_or_null<T>(ctx.inputs, 7);
         const Stat *lse = data_or_null<Stat>(ctx.inputs, 5), *grad_lse = data_or_null<Stat>(ctx.inputs, 6);
         const int64_t d_k = g.head_size, d_v = g.value_size;
         std::vector<double> grad_q(static_cast<size_t>(g.queries * d_k)), grad_k(static_cast<size_t>(g.keys * d_k)),
             grad_v(static_cast<size_t>(g.keys * d_v)), scores(static_cast<size_t>(g.keys));
         for (int64_t bh = 0; bh < g.batch_heads; ++bh) {
           std::fill(grad_q.begin(), grad_q.end(), 0.0);
           std::fill(grad_k.begin(), grad_k.end(), 0.0);
           std::fill(grad_v.begin(), grad_v.end(), 0.0);
           for (int64_t i = 0; i < g.queries; ++i) {
             row_scores(g, q, k, mask, bh, i, scores);
             const int64_t row = bh * g.queries + i;
             const double row_lse = lse[row];
             double delta = -static_cast<double>(grad_lse[row]);
             for (int64_t d = 0; d < d_v; ++d)
               delta += to_double(grad_out[row * d_v + d]) * to_double(out[row * d_v + d]);
             for (int64_t j = 0; j < g.keys; ++j) {
               const double s = scores[static_cast<size_t>(j)];
               const double p = std::isinf(row_lse) || std::isinf(s) ? 0.0 : std::exp(s - row_lse);
               double dp = 0;
               for (int64_t d = 0; d < d_v; ++d) {
                 dp += to_double(grad_out[row * d_v + d]) * to_double(v[(bh * g.keys + j) * d_v + d]);
                 grad_v[static_cast<size_t>(j * d_v + d)] += p * to_double(grad_out[row * d_v + d]);
               }
               const double ds = p * (dp - delta);
               for (int64_t d = 0; d < d_k; ++d) {
                 grad_q[static_cast<size_t>(i * d_k + d)] += g.scale * ds * to_double(k[(bh * g.keys + j) * d_k + d]);
                 grad_k[static_cast<size_t>(j * d_k + d)] += g.scale * ds * to_double(q[row * d_k + d]);
               }
               if (ctx.outputs.size() == 4) {
                 static_cast<T*>(ctx.outputs[3].raw_data())[row * g.keys + j] = from_double<T>(ds);
               }
             }
           }
           T *out_q = static_cast<T*>(ctx.outputs[0].raw_data()) + bh * g.queries * d_k,
             *out_k = static_cast<T*>(ctx.outputs[1].raw_data()) + bh * g.keys * d_k,
             *out_v = static_cast<T*>(ctx.outputs[2].raw_data()) + bh * g.keys * d_v;
           for (size_t e = 0; e < grad_q.size(); ++e) out_q[e] = from_double<T>(grad_q[e]);
           for (size_t e = 0; e < grad_k.size(); ++e) out_k[e] = from_double<T>(grad_k[e]);
           for (size_t e = 0; e < grad_v.size(); ++e) out_v[e] = from_double<T>(grad_v[e]);
         }
       });
     }});

// ---- scaled_dot_product_attention ----

const OpSchema& kAttention = define_op({
    .name = "scaled_dot_product_attention",
    .summary = "softmax(q kᵀ · scale + mask) v over (batch, heads, sequence, features), causal or with an additive "
               "mask; also returns each query row's logsumexp",
    .kind = OpKind::kNN,
    .precision = PrecisionRule::kComputeDType,
    .num_inputs = 3,
    .variadic_inputs = true,
    .infer =
        [](const InferContext& ctx) {
          check_attention_inputs(ctx, 0, 3);
          const TensorSpec &q = ctx.inputs[0], &v = ctx.inputs[2];
          return std::vector<TensorSpec>{{Shape{q.shape[0], q.shape[1], q.shape[2], v.shape[3]}, q.dtype},
                                         {Shape{q.shape[0], q.shape[1], q.shape[2]}, statistic_dtype(q.dtype)}};
        },
    .gradient =
        [](const GradContext& ctx) {
          const bool has_mask = ctx.inputs.size() == 4;
          const bool mask_gradient = has_mask && ctx.needs(3);
          Attrs attrs = ctx.attrs;
          attrs.set("score_gradient", mask_gradient);
          std::vector<Tensor> inputs = {ctx.grad_output(0), ctx.inputs[0],  ctx.inputs[1],     ctx.inputs[2],
                                        ctx.outputs[0],     ctx.outputs[1], ctx.grad_output(1)};
          if (has_mask) inputs.push_back(ctx.inputs[3]);
          std::vector<Tensor> grads = call_op(kAttentionBackward, inputs, attrs);
          // The mask is added to the scores, so its gradient is theirs summed over its broadcast axes.
          if (mask_gradient) grads[3] = reduce_to_shape(grads[3], ctx.inputs[3].shape());
          if (has_mask && !mask_gradient) grads.emplace_back();
          return grads;
        },
});

// Per query row: scores in double, their max and logsumexp, then the probability-weighted sum of v.
const bool kAttentionReference = register_kernel(
    "scaled_dot_product_attention",
    {.name = kReferenceKernel, .dtypes = internal::dtype_list(internal::kFloatingDTypes), .fn = [](KernelContext& ctx) {
       const AttentionGeometry g(ctx, 0);
       visit_dtype(ctx.inputs[0].dtype(), [&]<typename T>() {
         using Stat = std::conditional_t<std::is_same_v<T, double>, double, float>;
         const T *q = data_or_null<T>(ctx.inputs, 0), *k = data_or_null<T>(ctx.inputs, 1),
                 *v = data_or_null<T>(ctx.inputs, 2), *mask = data_or_null<T>(ctx.inputs, 3);
         T* out = static_cast<T*>(ctx.outputs[0].raw_data());
         Stat* lse = static_cast<Stat*>(ctx.outputs[1].raw_data());
         std::vector<double> scores(static_cast<size_t>(g.keys)), sum(static_cast<size_t>(g.value_size));
         for (int64_t bh = 0; bh < g.batch_heads; ++bh) {
           for (int64_t i = 0; i < g.queries; ++i) {
             row_scores(g, q, k, mask, bh, i, scores);
             const int64_t row = bh * g.queries + i;
             double max = -std::numeric_limits<double>::infinity(), total = 0;
             for (double s : scores) max = std::max(max, s);
             std::fill(sum.begin(), sum.end(), 0.0);
             if (!std::isinf(max)) {  // a row with every key masked attends to nothing: out 0, lse -inf
               for (int64_t j = 0; j < g.keys; ++j) {
                 const double p = std::exp(scores[static_cast<size_t>(j)] - max);
                 total += p;
                 for (int64_t d = 0; d < g.value_size; ++d) {
                   sum[static_cast<size_t>(d)] += p * to_double(v[(bh * g.keys + j) * g.value_size + d]);
                 }
               }
             }
             for (int64_t d = 0; d < g.value_size; ++d) {
               out[row * g.value_size + d] = from_double<T>(total > 0 ? sum[static_cast<size_t>(d)] / total : 0.0);
             }
             lse[row] = static_cast<Stat>(total > 0 ? max + std::log(total) : max);
           }
         }
       });
     }});

// The causal bias of the unfused form, (1, 1, T, S): 0 where key s <= query t, -inf above the diagonal.
Tensor causal_bias(int64_t queries, int64_t keys, DType dtype, Device device) {
  std::vector<float> bias(static_cast<size_t>(queries * keys), 0.0f);
  for (int64_t t = 0; t < queries; ++t) {
    for (int64_t s = t + 1; s < keys; ++s) bias[static_cast<size_t>(t * keys + s)] = -INFINITY;
  }
  return cast(Tensor::from_vector(bias, Shape{1, 1, queries, keys}, device), dtype);
}

// A mask of rank 2 (T, S) or 3 (B, T, S) as rank 4 (·, 1, T, S).
Tensor mask_of_rank_4(const Tensor& mask) {
  if (mask.rank() == 2) return reshape(mask, Shape{1, 1, mask.dim(0), mask.dim(1)});
  if (mask.rank() == 3) return expand_dims(mask, 1);
  return mask;
}

double scale_of(const Tensor& q, const AttentionOptions& options) {
  return options.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.dim(-1))));
}

}  // namespace

Tensor scaled_dot_product_attention_unfused(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const AttentionOptions& options) {
  Tensor scores = matmul(q, k, false, true) * scale_of(q, options);
  if (options.mask.defined()) scores = scores + mask_of_rank_4(options.mask);
  if (options.causal) scores = scores + causal_bias(q.dim(-2), k.dim(-2), scores.dtype(), scores.device());
  Tensor probabilities = softmax(scores, -1);
  if (options.dropout > 0) probabilities = dropout(probabilities, options.dropout, options.generator);
  return matmul(probabilities, v);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options) {
  // Dropout on the probabilities needs one random number per score: that form keeps the matrix.
  if (options.dropout > 0) return scaled_dot_product_attention_unfused(q, k, v, options);
  std::vector<Tensor> inputs = {q, k, v};
  if (options.mask.defined()) inputs.push_back(mask_of_rank_4(options.mask));
  return call_op(kAttention, inputs, Attrs{{"scale", scale_of(q, options)}, {"causal", options.causal}})[0];
}

}  // namespace nimbus
