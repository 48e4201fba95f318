// Neural-network ops: convolution, pooling, normalization, dropout, losses.
//
//   Conv2dOptions conv{.strides = {1, 1}, .padding = "same"};
//   Tensor y = conv2d(x, w, conv);                 // NHWC: x (N,H,W,C), w (KH,KW,C/groups,F) -> (N,OH,OW,F)
//   Tensor p = max_pool2d(y, {.pool_size = {2, 2}});
//   auto [out, mean, var] = batch_norm_training(y, gamma, beta, 1e-3);
//   Tensor loss = sparse_softmax_cross_entropy(logits, labels);  // per example, (N)
//
// Layouts: data_format "NHWC" (Keras's default) uses filters (KH, KW, C/groups, F);
// "NCHW" (PyTorch's) uses filters (F, C/groups, KH, KW).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "nimbus/base/rng.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus {

struct Conv2dOptions {
  std::array<int64_t, 2> strides{1, 1};
  std::string padding = "valid";  // "valid" or "same" (TF's rules: output = ceil(input / stride))
  std::array<int64_t, 2> dilations{1, 1};
  int64_t groups = 1;
  std::string data_format = "NHWC";
};

Tensor conv2d(const Tensor& x, const Tensor& filter, const Conv2dOptions& options = {});
// The gradient of conv2d w.r.t. its input, given the output gradient (ops of their own).
Tensor conv2d_backward_input(const Tensor& grad_y, const Tensor& filter, const Shape& input_shape,
                             const Conv2dOptions& options = {});
Tensor conv2d_backward_filter(const Tensor& grad_y, const Tensor& x, const Shape& filter_shape,
                              const Conv2dOptions& options = {});

struct Pool2dOptions {
  std::array<int64_t, 2> pool_size{2, 2};
  std::array<int64_t, 2> strides{0, 0};  // 0: equal to pool_size, as in Keras
  std::string padding = "valid";
  std::string data_format = "NHWC";
};

Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options = {});
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options = {});
Tensor max_pool2d_backward(const Tensor& grad_y, const Tensor& x, const Pool2dOptions& options = {});
Tensor avg_pool2d_backward(const Tensor& grad_y, const Shape& input_shape, const Pool2dOptions& options = {});

// Batch normalization over every axis but the channel axis (last for NHWC or rank 2, 1 for NCHW).
// Training: normalizes with the batch's mean and (biased) variance and returns them.
std::tuple<Tensor, Tensor, Tensor> batch_norm_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                       double epsilon = 1e-3, const std::string& data_format = "NHWC");
Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                            const Tensor& variance, double epsilon = 1e-3, const std::string& data_format = "NHWC");
// Returns (grad_x, grad_gamma, grad_beta).
std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& gamma,
                                                       const Tensor& mean, const Tensor& variance, double epsilon,
                                                       const std::string& data_format = "NHWC");

// Layer normalization over the last axis with scale gamma and offset beta (both (D)).
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double epsilon = 1e-3);

// Zeroes each element with probability `rate` and scales the rest by 1 / (1 - rate).
// The mask comes from (seed, offset) of `generator`, so a run is reproducible.
Tensor dropout(const Tensor& x, double rate, Generator* generator = nullptr);

// Scaled dot-product attention, softmax(q kᵀ · scale + mask) v, over q (B, H, T, D), k (B, H, S, D),
// v (B, H, S, Dv) -> (B, H, T, Dv): MultiHeadAttention's layout (batch, heads, sequence, head size).
// One fused op (FlashAttention: key blocks with an online softmax, only each query row's logsumexp
// kept for the backward pass, which recomputes the scores), so memory grows with T, not T x S.
//
//   Tensor y = scaled_dot_product_attention(q, k, v, {.causal = true});
struct AttentionOptions {
  Tensor mask = {};             // added to the scores: (T, S), (B or 1, T, S) or (B or 1, H or 1, T or 1, S)
  bool causal = false;          // query t attends to keys s <= t only (top-left aligned, as Keras and torch)
  std::optional<double> scale;  // default 1 / sqrt(D)
  double dropout = 0;           // on the probabilities; above 0 the call runs the unfused form
  Generator* generator = nullptr;
};
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});
// The same as separate ops (matmul, scale, mask add, softmax, dropout, matmul), which keep every
// (T x S) matrix: the form the fusion pass recognizes, and the tests' and benchmarks' baseline.
Tensor scaled_dot_product_attention_unfused(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const AttentionOptions& options = {});

// Per-example losses, (N). logits (N, C) are unnormalized; labels are class ids (i32/i64).
Tensor sparse_softmax_cross_entropy(const Tensor& logits, const Tensor& labels);
// labels are probabilities (N, C).
Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& labels);

}  // namespace nimbus
