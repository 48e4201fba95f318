// DepthwiseConv2D, MultiHeadAttention, PositionEmbedding, GlobalAveragePooling1D
// and Normalization: Keras's weight shapes, numerics against plain loops in f64,
// gradients against finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "nimbus/autodiff/gradient_tape.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/reduction.h"
#include "train_test_util.h"

namespace nimbus::testing {
namespace {

using nn::Layer;

// Gives every weight of the layer random values (biases start at zero, which would hide them).
void randomize(const Layer& layer, uint64_t seed) {
  for (const Variable& weight : layer.weights()) {
    Variable target = weight;
    target.assign(random_input(weight.shape(), weight.dtype(), seed++) * 0.5);
  }
}

TEST(DepthwiseConv2D, MatchesAPerChannelLoopWithKerasKernelShapeAndOrder) {
  Float64Weights f64;
  Layer layer = nn::DepthwiseConv2D({3, 3}, {.padding = "same", .depth_multiplier = 2, .name = "dw"});
  const Tensor x = random_input({2, 5, 4, 3}, DType::kF64);
  const Tensor y = layer(x);
  ASSERT_EQ(y.shape(), (Shape{2, 5, 4, 6}));
  ASSERT_EQ(layer.weights().size(), 2u);
  EXPECT_EQ(layer.weights()[0].name(), "dw/depthwise_kernel");
  EXPECT_EQ(layer.weights()[0].shape(), (Shape{3, 3, 3, 2}));
  EXPECT_EQ(layer.weights()[1].shape(), (Shape{6}));
  randomize(layer, 3);
  const std::vector<double> xs = values_of(x), ks = values_of(layer.weights()[0].value()),
                            bs = values_of(layer.weights()[1].value()), out = values_of(layer(x));
  // y[n, i, j, c * 2 + m] = b[c * 2 + m] + sum over the 3x3 window (padding 1) of x[n, ., ., c] k[., ., c, m].
  double worst = 0;
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 4; ++j)
        for (int c = 0; c < 3; ++c)
          for (int m = 0; m < 2; ++m) {
            double acc = bs[c * 2 + m];
            for (int ki = 0; ki < 3; ++ki)
              for (int kj = 0; kj < 3; ++kj) {
                const int r = i + ki - 1, s = j + kj - 1;
                if (r < 0 || r >= 5 || s < 0 || s >= 4) continue;
                acc += xs[((n * 5 + r) * 4 + s) * 3 + c] * ks[((ki * 3 + kj) * 3 + c) * 2 + m];
              }
            worst = std::max(worst, std::abs(out[((n * 5 + i) * 4 + j) * 6 + c * 2 + m] - acc));
          }
  EXPECT_LT(worst, 1e-12);
  // Strides and padding valid: (7 - 3) / 2 + 1 = 3.
  EXPECT_EQ(nn::DepthwiseConv2D({3, 3}, {.strides = {2, 2}})(random_input({1, 7, 7, 2}, DType::kF64)).shape(),
            (Shape{1, 3, 3, 2}));
}

// Keras's MultiHeadAttention written out with loops: per head, projections, scaled scores, masked
// softmax, weighted values; then the output projection summed over heads.
std::vector<double> reference_attention(const Layer& layer, const Tensor& query, const Tensor& value,
                                        const std::vector<int>& mask, int heads, int key_dim) {
  const std::vector<Variable> w = layer.weights();  // q kernel, q bias, k kernel, k bias, v ..., out ...
  const auto wq = values_of(w[0].value()), bq = values_of(w[1].value()), wk = values_of(w[2].value()),
             bk = values_of(w[3].value()), wv = values_of(w[4].value()), bv = values_of(w[5].value()),
             wo = values_of(w[6].value()), bo = values_of(w[7].value());
  const auto q_in = values_of(query), v_in = values_of(value);
  const int n_batch = static_cast<int>(query.dim(0)), t_len = static_cast<int>(query.dim(1)),
            s_len = static_cast<int>(value.dim(1)), dq = static_cast<int>(query.dim(2)),
            dv = static_cast<int>(value.dim(2)), out_dim = static_cast<int>(w[7].shape()[0]);
  std::vector<double> out(static_cast<size_t>(n_batch * t_len * out_dim));
  auto project = [&](const std::vector<double>& x, int row, int d, const std::vector<double>& kernel,
                     const std::vector<double>& bias, int h, int j) {
    double acc = bias[h * key_dim + j];
    for (int k = 0; k < d; ++k) acc += x[row * d + k] * kernel[(k * heads + h) * key_dim + j];
    return acc;
  };
  for (int n = 0; n < n_batch; ++n) {
    for (int t = 0; t < t_len; ++t) {
      for (int o = 0; o < out_dim; ++o) out[(n * t_len + t) * out_dim + o] = bo[o];
      for (int h = 0; h < heads; ++h) {
        std::vector<double> scores(s_len);
        for (int s = 0; s < s_len; ++s) {
          double dot = 0;
          for (int j = 0; j < key_dim; ++j) {
            dot += project(q_in, n * t_len + t, dq, wq, bq, h, j) * project(v_in, n * s_len + s, dv, wk, bk, h, j);
          }
          scores[s] = dot / std::sqrt(double(key_dim)) + (mask[(n * t_len + t) * s_len + s] ? 0 : -1e9);
        }
        const double top = *std::max_element(scores.begin(), scores.end());
        double total = 0;
        for (double& score : scores) total += (score = std::exp(score - top));
        for (int j = 0; j < key_dim; ++j) {  // value_dim == key_dim here
          double head_value = 0;
          for (int s = 0; s < s_len; ++s) {
            head_value += scores[s] / total * project(v_in, n * s_len + s, dv, wv, bv, h, j);
          }
          for (int o = 0; o < out_dim; ++o) {
            out[(n * t_len + t) * out_dim + o] += head_value * wo[(h * key_dim + j) * out_dim + o];
          }
        }
      }
    }
  }
  return out;
}

TEST(MultiHeadAttention, KerasWeightShapesAndMaskedAttentionMatchLoops) {
  Float64Weights f64;
  Layer attention = nn::MultiHeadAttention(2, 3, {.output_shape = 5, .name = "mha"});
  const Tensor query = random_input({2, 4, 6}, DType::kF64, 1), value = random_input({2, 3, 7}, DType::kF64, 2);
  // Query t may attend to positions s <= t (and the last query row to none but s = 0).
  std::vector<int> mask(2 * 4 * 3);
  for (int n = 0; n < 2; ++n)
    for (int t = 0; t < 4; ++t)
      for (int s = 0; s < 3; ++s) mask[(n * 4 + t) * 3 + s] = (s <= t && !(n == 1 && t == 3 && s > 0)) ? 1 : 0;
  std::vector<double> mask_values(mask.begin(), mask.end());
  const Tensor mask_tensor = Tensor::from_vector<double>(mask_values, {2, 4, 3});
  const Tensor y = attention({query, value, value, mask_tensor})[0];
  ASSERT_EQ(y.shape(), (Shape{2, 4, 5}));
  std::vector<std::pair<std::string, Shape>> expected = {{"mha/query/kernel", {6, 2, 3}},
                                                         {"mha/query/bias", {2, 3}},
                                                         {"mha/key/kernel", {7, 2, 3}},
                                                         {"mha/key/bias", {2, 3}},
                                                         {"mha/value/kernel", {7, 2, 3}},
                                                         {"mha/value/bias", {2, 3}},
                                                         {"mha/attention_output/kernel", {2, 3, 5}},
                                                         {"mha/attention_output/bias", {5}}};
  ASSERT_EQ(attention.weights().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(attention.weights()[i].name(), expected[i].first);
    EXPECT_EQ(attention.weights()[i].shape(), expected[i].second) << expected[i].first;
  }
  randomize(attention, 11);
  const std::vector<double> reference = reference_attention(attention, query, value, mask, 2, 3);
  EXPECT_LT(relative_error(values_of(attention({query, value, value, mask_tensor})[0]), reference), 1e-12);
  // Without a mask every position counts: the result changes.
  const std::vector<int> open(mask.size(), 1);
  EXPECT_LT(
      relative_error(values_of(attention({query, value})[0]), reference_attention(attention, query, value, open, 2, 3)),
      1e-12);
}

TEST(PositionEmbedding, AddsOneLearnedRowPerPositionAndPoolingAveragesSteps) {
  Layer positions = nn::PositionEmbedding(6, {.name = "pos"});
  const Tensor x = random_input({2, 4, 3});
  const Tensor p = positions(x);
  ASSERT_EQ(p.shape(), (Shape{2, 4, 3}));
  ASSERT_EQ(positions.weights()[0].shape(), (Shape{6, 3}));
  const std::vector<double> table = values_of(positions.weights()[0].value()), got = values_of(p);
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 12; ++i) EXPECT_EQ(got[n * 12 + i], table[i]);  // rows 0..3, for each sample
  const std::vector<double> pooled = values_of(nn::GlobalAveragePooling1D()(x)), xs = values_of(x);
  ASSERT_EQ(pooled.size(), 6u);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c) {
      double mean = 0;
      for (int t = 0; t < 4; ++t) mean += xs[(n * 4 + t) * 3 + c] / 4;
      EXPECT_NEAR(pooled[n * 3 + c], mean, 1e-6);
    }
}

TEST(Normalization, AdaptComputesPerChannelMeanAndVarianceAndGivenOnesApply) {
  // Channel c has mean 10 c and standard deviation c + 1.
  Tensor data = random_input({500, 3}, DType::kF32, 5) * Tensor::from_vector<float>({1, 2, 3}, {3}) +
                Tensor::from_vector<float>({0, 10, 20}, {3});
  Layer normalization = nn::Normalization({.name = "norm"});
  nn::adapt(normalization, data);
  ASSERT_EQ(normalization.weights().size(), 2u);
  EXPECT_EQ(normalization.weights()[0].name(), "norm/mean");
  EXPECT_TRUE(normalization->trainable_weights().empty());
  EXPECT_LT(relative_error(normalization.weights()[0].value(), mean(data, {0})), 1e-5);
  EXPECT_LT(relative_error(normalization.weights()[1].value(), variance(data, {0})), 1e-5);
  const Tensor normalized = normalization(data);
  EXPECT_LT(values_of(reduce_max(abs(mean(normalized, {0}))))[0], 1e-4);
  EXPECT_LT(relative_error(variance(normalized, {0}), full({3}, 1.0)), 1e-4);

  // Given statistics, and their inverse; a scalar axis list of none normalizes with one mean.
  Layer given = nn::Normalization({.mean = std::vector<double>{1, 2}, .variance = std::vector<double>{4, 0}});
  const Tensor x = Tensor::from_vector<float>({3, 2, 5, 4}, {2, 2});
  EXPECT_EQ(values_of(given(x)), (std::vector<double>{1, 0, 2, 2e7}));  // variance 0: divides by 1e-7
  EXPECT_TRUE(given.weights().empty());
  Layer inverse =
      nn::Normalization({.mean = std::vector<double>{1, 2}, .variance = std::vector<double>{4, 9}, .invert = true});
  EXPECT_EQ(values_of(inverse(x)), (std::vector<double>{7, 8, 11, 14}));
  Layer scalar = nn::Normalization({.axis = {}});
  nn::adapt(scalar, x);
  EXPECT_EQ(scalar.weights()[0].shape(), Shape{});
  EXPECT_NEAR(values_of(scalar.weights()[0].value())[0], 3.5, 1e-6);
  EXPECT_THROW(nn::adapt(given, x), InvalidArgument);
  EXPECT_THROW(nn::adapt(nn::Dense(2), x), InvalidArgument);
}

TEST(SequenceLayers, GradientsOfATransformerBlockMatchFiniteDifferencesInF64) {
  Float64Weights f64;
  nn::KerasTensor in = nn::Input({4, 3}, DType::kF64);
  nn::Layer normalization = nn::Normalization();
  nn::adapt(normalization, random_input({16, 4, 3}, DType::kF64, 3) * 2.0 + 1.0);
  nn::KerasTensor tokens = nn::Dense(6)(normalization(in));
  nn::KerasTensor embedded = nn::Add()({tokens, nn::PositionEmbedding(4)(tokens)});
  nn::KerasTensor attended = nn::MultiHeadAttention(2, 3, {.value_dim = 2})({embedded, embedded});
  nn::KerasTensor block = nn::LayerNormalization()(nn::Add()({embedded, attended}));
  // DepthwiseConv2D on the sequence seen as a (4, 1) image with 6 channels.
  nn::KerasTensor image = nn::Reshape({4, 1, 6})(block);
  nn::KerasTensor mixed = nn::DepthwiseConv2D({3, 1}, {.padding = "same", .activation = "tanh"})(image);
  nn::KerasTensor out = nn::Dense(2)(nn::GlobalAveragePooling1D()(nn::Reshape({4, 6})(mixed)));
  nn::Model model({in}, {out});
  const Tensor x = random_input({3, 4, 3}, DType::kF64, 8), target = random_input({3, 2}, DType::kF64, 9);
  auto loss_of = [&] { return sum(square(model(x, true) - target)); };
  const std::vector<Variable> variables = model.trainable_weights();
  ASSERT_EQ(variables.size(), 2u + 1 + 8 + 2 + 2 + 2);
  for (const Variable& v : variables) {
    Variable target_variable = v;
    target_variable.assign(v.value() + random_input(v.shape(), DType::kF64, 21) * 0.1);  // nonzero biases
  }
  GradientTape tape;
  const std::vector<Tensor> grads = tape.gradient(loss_of(), variables);
  for (size_t i = 0; i < variables.size(); ++i) {
    const std::vector<double> numeric = numeric_gradient(variables[i], [&] { return loss_of().item<double>(); });
    if (variables[i].name().ends_with("key/bias")) {
      // q (k_s + b) shifts every score of a row by q b, which softmax ignores: the gradient is 0.
      for (size_t j = 0; j < numeric.size(); ++j) {
        EXPECT_LT(std::abs(values_of(grads[i])[j]), 1e-9);
        EXPECT_LT(std::abs(numeric[j]), 1e-7);
      }
      continue;
    }
    EXPECT_LT(relative_error(values_of(grads[i]), numeric), 1e-6) << variables[i].name();
  }
}

}  // namespace
}  // namespace nimbus::testing
