// MultiHeadAttention's use_causal_mask: position t never sees positions after it, forward and
// backward, and the mask equals Keras's tril(ones(T, S)) given as an explicit attention_mask;
// reachable from a config's layer list and from a Keras file's call kwargs.
#include <gtest/gtest.h>

#include <cmath>

#include "nimbus/autodiff/gradient_tape.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/shape_ops.h"
#include "train_test_util.h"

namespace nimbus::testing {
namespace {

constexpr int64_t kCausalBatch = 2, kCausalLength = 6, kCausalFeatures = 5;

// x with the features of position `position` replaced by other random values.
Tensor with_position_changed(const Tensor& x, int64_t position, uint64_t seed) {
  std::vector<double> values = values_of(x);
  const std::vector<double> fresh = values_of(random_input(x.shape(), DType::kF64, seed));
  for (int64_t n = 0; n < x.dim(0); ++n)
    for (int64_t f = 0; f < x.dim(2); ++f) {
      const size_t i = static_cast<size_t>((n * x.dim(1) + position) * x.dim(2) + f);
      values[i] = fresh[i];
    }
  return Tensor::from_vector<double>(values, x.shape());
}

// Largest |a - b| over positions [first, last] of (N, T, F) tensors.
double max_difference_at(const Tensor& a, const Tensor& b, int64_t first, int64_t last) {
  const std::vector<double> av = values_of(a), bv = values_of(b);
  double worst = 0;
  for (int64_t n = 0; n < a.dim(0); ++n)
    for (int64_t t = first; t <= last; ++t)
      for (int64_t f = 0; f < a.dim(2); ++f) {
        const size_t i = static_cast<size_t>((n * a.dim(1) + t) * a.dim(2) + f);
        worst = std::max(worst, std::abs(av[i] - bv[i]));
      }
  return worst;
}

// Self-attention with random weights (nonzero biases) in f64.
nn::Layer causal_self_attention(const Tensor& x) {
  nn::Layer attention = nn::MultiHeadAttention(2, 3, {.use_causal_mask = true, .name = "causal"});
  (void)attention({x, x});
  uint64_t seed = 40;
  for (const Variable& weight : attention.weights()) {
    Variable target = weight;
    target.assign(random_input(weight.shape(), DType::kF64, seed++) * 0.5);
  }
  return attention;
}

TEST(CausalAttention, ChangingTokenAfterTNeverChangesOutputsUpToT) {
  Float64Weights f64;
  const Tensor x = random_input({kCausalBatch, kCausalLength, kCausalFeatures}, DType::kF64, 1);
  nn::Layer attention = causal_self_attention(x);
  const Tensor y = attention({x, x})[0];
  for (int64_t t = 0; t + 1 < kCausalLength; ++t) {
    const Tensor changed = with_position_changed(x, t + 1, 100 + t);
    const Tensor y_changed = attention({changed, changed})[0];
    EXPECT_EQ(max_difference_at(y, y_changed, 0, t), 0.0) << "outputs up to " << t << " moved";
    // The change is seen from t + 1 on: the test would notice a mask that hides everything.
    EXPECT_GT(max_difference_at(y, y_changed, t + 1, t + 1), 1e-3) << t;
  }
}

TEST(CausalAttention, GradientsOfOutputsUpToTAreZeroForInputsAfterT) {
  Float64Weights f64;
  const Tensor x = random_input({kCausalBatch, kCausalLength, kCausalFeatures}, DType::kF64, 2);
  nn::Layer attention = causal_self_attention(x);
  const Tensor weights = random_input({kCausalBatch, kCausalLength, kCausalFeatures}, DType::kF64, 3);
  for (int64_t t = 0; t < kCausalLength; ++t) {
    // loss = sum over positions <= t of weights * y: its gradient w.r.t. x at positions > t must be 0.
    std::vector<double> keep(kCausalBatch * kCausalLength * kCausalFeatures, 0.0);
    for (int64_t n = 0; n < kCausalBatch; ++n)
      for (int64_t s = 0; s <= t; ++s)
        for (int64_t f = 0; f < kCausalFeatures; ++f) keep[(n * kCausalLength + s) * kCausalFeatures + f] = 1;
    const Tensor selected = weights * Tensor::from_vector<double>(keep, weights.shape());
    GradientTape tape;
    tape.watch(x);
    const Tensor loss = sum(attention({x, x})[0] * selected);
    const Tensor grad = tape.gradient(loss, std::vector<Tensor>{x})[0];
    const Tensor zeros_like_grad = zeros(grad.shape(), DType::kF64);
    EXPECT_GT(max_difference_at(grad, zeros_like_grad, 0, t), 1e-6) << "no gradient reaches positions <= " << t;
    if (t + 1 < kCausalLength) {
      EXPECT_EQ(max_difference_at(grad, zeros_like_grad, t + 1, kCausalLength - 1), 0.0)
          << "gradient leaks to positions after " << t;
    }
  }
}

TEST(CausalAttention, EqualsKerasLowerTriangularMaskGivenExplicitlyAndCombinesWithOne) {
  Float64Weights f64;
  // Cross-attention with query length 4 and key length 6: query t sees keys s <= t (Keras's tril(ones(T, S))).
  const Tensor query = random_input({2, 4, 5}, DType::kF64, 4), value = random_input({2, 6, 5}, DType::kF64, 5);
  nn::Layer causal = nn::MultiHeadAttention(2, 3, {.use_causal_mask = true});
  nn::Layer plain = nn::MultiHeadAttention(2, 3);
  (void)causal({query, value});
  (void)plain({query, value});
  for (size_t i = 0; i < causal.weights().size(); ++i) {
    Variable target = plain.weights()[i];
    target.assign(causal.weights()[i].value());
  }
  const Tensor tril_mask = broadcast_to(tril(ones({4, 6}, DType::kF64)), Shape{2, 4, 6});
  EXPECT_EQ(values_of(causal({query, value})[0]), values_of(plain({query, value, value, tril_mask})[0]));
  // With an attention_mask as well, a position counts only where both allow it.
  std::vector<double> padding(2 * 4 * 6, 1.0);
  for (int t = 0; t < 4; ++t) padding[(1 * 4 + t) * 6 + 0] = 0;  // sample 1 hides key 0 from every query
  const Tensor padding_mask = Tensor::from_vector<double>(padding, {2, 4, 6});
  EXPECT_EQ(values_of(causal({query, value, value, padding_mask})[0]),
            values_of(plain({query, value, value, padding_mask * tril_mask})[0]));
}

TEST(CausalAttention, FromALayerListAndFromKerasCallKwargs) {
  const nlohmann::json arguments = {{"num_heads", 2}, {"key_dim", 4}, {"use_causal_mask", true}};
  const nn::Layer from_config = nn::layer_from_config("MultiHeadAttention", arguments);
  EXPECT_EQ(from_config->get_config().value("use_causal_mask", false), true);
  EXPECT_FALSE(nn::MultiHeadAttention(2, 4)->get_config().contains("use_causal_mask"));  // as Keras writes it

  // A layer list: the causal layer's output at position 0 ignores position 1.
  const nlohmann::json layers = nlohmann::json::parse(R"([
      {"MultiHeadAttention": {"name": "attention", "num_heads": 2, "key_dim": 4, "use_causal_mask": true,
                              "inbound": ["input", "input"]}}])");
  nn::Model model = nn::model_from_layer_list({3, 4}, DType::kF32, layers, "causal_list");
  const Tensor x = random_input({1, 3, 4}, DType::kF32, 6);
  const Tensor x_changed = with_position_changed(cast(x, DType::kF64), 1, 7);
  EXPECT_EQ(
      max_difference_at(cast(model(x), DType::kF64), cast(model(cast(x_changed, DType::kF32)), DType::kF64), 0, 0),
      0.0);

  // Keras 3 writes mha(x, x, use_causal_mask=True) as a kwarg of the call.
  const nlohmann::json keras = nlohmann::json::parse(R"({
    "class_name": "Functional",
    "config": {"name": "keras_causal",
      "layers": [
        {"class_name": "InputLayer", "name": "tokens", "config": {"name": "tokens", "batch_shape": [null, 3, 4]},
         "inbound_nodes": []},
        {"class_name": "MultiHeadAttention", "name": "mha",
         "config": {"name": "mha", "num_heads": 2, "key_dim": 4},
         "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"keras_history": ["tokens", 0, 0]}},
                                     {"class_name": "__keras_tensor__", "config": {"keras_history": ["tokens", 0, 0]}}],
                            "kwargs": {"use_causal_mask": true}}]}],
      "input_layers": [["tokens", 0, 0]], "output_layers": [["mha", 0, 0]]}})");
  nn::Model keras_model = nn::model_from_config(keras);
  EXPECT_EQ(keras_model.layers().back()->get_config().value("use_causal_mask", false), true);
}

}  // namespace
}  // namespace nimbus::testing
