// Losses and metrics against values computed by hand on the host (f64).
#include <gtest/gtest.h>

#include <cmath>

#include "nimbus/autodiff/gradient_tape.h"
#include "nimbus/base/error.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/shape_ops.h"
#include "nimbus/train/losses.h"
#include "nimbus/train/metrics.h"
#include "train_test_util.h"

namespace nimbus::testing {
namespace {

// Two samples, three classes.
const std::vector<double> kLogits = {2.0, -1.0, 0.5, 0.1, 0.2, 3.0};
const std::vector<int64_t> kLabels = {0, 1};

std::vector<double> log_softmax_row(const std::vector<double>& logits, size_t row, size_t classes) {
  double max = -INFINITY, total = 0;
  for (size_t c = 0; c < classes; ++c) max = std::max(max, logits[row * classes + c]);
  for (size_t c = 0; c < classes; ++c) total += std::exp(logits[row * classes + c] - max);
  std::vector<double> out(classes);
  for (size_t c = 0; c < classes; ++c) out[c] = logits[row * classes + c] - max - std::log(total);
  return out;
}

TEST(Losses, SparseCategoricalCrossentropyWithAndWithoutSmoothing) {
  const Tensor logits = Tensor::from_vector<double>(kLogits, {2, 3});
  const Tensor labels = Tensor::from_vector<int64_t>(kLabels, {2});
  for (const double s : {0.0, 0.1}) {
    double expected = 0;
    for (size_t r = 0; r < 2; ++r) {
      const auto lp = log_softmax_row(kLogits, r, 3);
      for (size_t c = 0; c < 3; ++c) {
        const double target = (c == size_t(kLabels[r]) ? 1 - s : 0) + s / 3;
        expected -= target * lp[c] / 2;
      }
    }
    const auto from_logits = train::SparseCategoricalCrossentropy({.from_logits = true, .label_smoothing = s});
    EXPECT_NEAR(from_logits(labels, logits).item<double>(), expected, 1e-14) << s;
    // From probabilities (clipped at 1e-7: far from these values).
    const auto from_probs = train::SparseCategoricalCrossentropy({.label_smoothing = s});
    EXPECT_NEAR(from_probs(labels, softmax(logits, -1)).item<double>(), expected, 1e-14) << s;
    // Labels as (N, 1) floats work as Keras's do.
    EXPECT_NEAR(from_logits(Tensor::from_vector<float>({0, 1}, {2, 1}), logits).item<double>(), expected, 1e-14);
  }
  EXPECT_THROW(train::SparseCategoricalCrossentropy({.label_smoothing = 1.5}), InvalidArgument);
  EXPECT_THROW(train::SparseCategoricalCrossentropy()(Tensor::from_vector<int64_t>({0, 1, 2}, {3}), logits),
               InvalidArgument);
}

TEST(Losses, CategoricalCrossentropyMatchesSparseOnOneHotTargets) {
  const Tensor logits = Tensor::from_vector<double>(kLogits, {2, 3});
  const Tensor one_hot = Tensor::from_vector<double>({1, 0, 0, 0, 1, 0}, {2, 3});
  const auto sparse = train::SparseCategoricalCrossentropy({.from_logits = true, .label_smoothing = 0.2});
  const auto dense = train::CategoricalCrossentropy({.from_logits = true, .label_smoothing = 0.2});
  EXPECT_NEAR(dense(one_hot, logits).item<double>(),
              sparse(Tensor::from_vector<int64_t>(kLabels, {2}), logits).item<double>(), 1e-14);
}

TEST(Losses, BinaryCrossentropyMseMae) {
  const std::vector<double> x = {-2.0, 0.5, 3.0, 0.0};
  const std::vector<double> z = {0, 1, 1, 0};
  const Tensor logits = Tensor::from_vector<double>(x, {2, 2});
  const Tensor targets = Tensor::from_vector<double>(z, {2, 2});
  double bce = 0, mse = 0, mae = 0;
  for (size_t i = 0; i < 4; ++i) {
    const double p = 1 / (1 + std::exp(-x[i]));
    bce -= (z[i] * std::log(p) + (1 - z[i]) * std::log(1 - p)) / 4;
    mse += (z[i] - x[i]) * (z[i] - x[i]) / 4;
    mae += std::abs(z[i] - x[i]) / 4;
  }
  EXPECT_NEAR(train::BinaryCrossentropy({.from_logits = true})(targets, logits).item<double>(), bce, 1e-14);
  EXPECT_NEAR(train::BinaryCrossentropy()(targets, sigmoid(logits)).item<double>(), bce, 1e-12);
  EXPECT_NEAR(train::get_loss("mse")(targets, logits).item<double>(), mse, 1e-14);
  EXPECT_NEAR(train::get_loss("mae")(targets, logits).item<double>(), mae, 1e-14);
  EXPECT_THROW(train::get_loss("hinge_typo"), InvalidArgument);
}

TEST(Losses, GradientsMatchFiniteDifferences) {
  Variable logits(Tensor::from_vector<double>(kLogits, {2, 3}), "logits");
  const Tensor labels = Tensor::from_vector<int64_t>(kLabels, {2});
  const Tensor probabilities = Tensor::from_vector<double>({0.2, 0.5, 0.3, 0.1, 0.1, 0.8}, {2, 3});
  const std::vector<train::Loss> losses = {
      train::SparseCategoricalCrossentropy({.from_logits = true, .label_smoothing = 0.1}),
      train::CategoricalCrossentropy({.from_logits = true}), train::BinaryCrossentropy({.from_logits = true}),
      train::MeanSquaredError(), train::MeanAbsoluteError()};
  for (const train::Loss& loss : losses) {
    const Tensor target = loss.name() == "sparse_categorical_crossentropy" ? labels : probabilities;
    GradientTape tape;
    const Tensor value = loss(target, logits.value());
    const Tensor grad = tape.gradient(value, std::vector<Variable>{logits})[0];
    const auto numeric = numeric_gradient(logits, [&] { return loss(target, logits.value()).item<double>(); });
    EXPECT_LT(relative_error(values_of(grad), numeric), 1e-7) << loss.name();
  }
}

// A language model's logits (batch, time, classes): one loss per token, averaged, through the fused op
// and its gradient op (the reference kernels in f64, the vectorized ones in f32).
TEST(Losses, SparseCategoricalCrossentropyOverTokens) {
  const std::vector<double> logits_values = {2.0, -1.0, 0.5, 0.1, 0.2, 3.0, -0.4, 1.5, 0.0, 0.7, -2.0, 1.1};
  const std::vector<int64_t> label_values = {0, 2, 1, 0};
  Variable logits(Tensor::from_vector<double>(logits_values, {2, 2, 3}), "logits");
  const Tensor labels = Tensor::from_vector<int64_t>(label_values, {2, 2});
  const auto loss = train::SparseCategoricalCrossentropy({.from_logits = true});
  double expected = 0;
  for (size_t token = 0; token < 4; ++token) {
    expected -= log_softmax_row(logits_values, token, 3)[size_t(label_values[token])] / 4;
  }
  GradientTape tape;
  const Tensor value = loss(labels, logits.value());
  EXPECT_NEAR(value.item<double>(), expected, 1e-14);
  const Tensor grad = tape.gradient(value, std::vector<Variable>{logits})[0];
  const auto numeric = numeric_gradient(logits, [&] { return loss(labels, logits.value()).item<double>(); });
  EXPECT_LT(relative_error(values_of(grad), numeric), 1e-7);

  Variable logits_f32(logits.value().to(DType::kF32), "logits_f32");
  GradientTape tape_f32;
  const Tensor value_f32 = loss(labels, logits_f32.value());
  EXPECT_NEAR(value_f32.item<double>(), expected, 1e-6);
  const Tensor grad_f32 = tape_f32.gradient(value_f32, std::vector<Variable>{logits_f32})[0];
  EXPECT_LT(relative_error(values_of(grad_f32.to(DType::kF64)), values_of(grad)), 1e-6);
}

TEST(Metrics, AccuracyVariantsAndTopK) {
  const Tensor logits = Tensor::from_vector<float>({0.1f, 0.7f, 0.2f, 0.5f, 0.3f, 0.2f, 0.2f, 0.3f, 0.5f}, {3, 3});
  const Tensor labels = Tensor::from_vector<uint8_t>({1, 2, 2}, {3});
  auto accuracy = train::get_metric("accuracy", train::SparseCategoricalCrossentropy());
  EXPECT_EQ(accuracy->name(), "accuracy");
  accuracy->update_state(labels, logits);
  EXPECT_NEAR(accuracy->result(), 2.0 / 3, 1e-12);
  accuracy->update_state(Tensor::from_vector<uint8_t>({0}, {1}), slice(logits, {0, 0}, {1, 3}));
  EXPECT_NEAR(accuracy->result(), 2.0 / 4, 1e-12);
  accuracy->reset_state();
  EXPECT_EQ(accuracy->result(), 0);

  auto top2 = train::SparseTopKCategoricalAccuracy(2);
  top2->update_state(labels, logits);  // row 1: label 2 scores lowest -> out
  EXPECT_NEAR(top2->result(), 2.0 / 3, 1e-12);

  auto categorical = train::get_metric("accuracy", train::CategoricalCrossentropy());
  categorical->update_state(Tensor::from_vector<float>({0, 1, 0, 1, 0, 0, 0, 1, 0}, {3, 3}), logits);
  EXPECT_NEAR(categorical->result(), 2.0 / 3, 1e-12);
  EXPECT_THROW(train::get_metric("f1_typo", train::Loss()), InvalidArgument);
}

TEST(Metrics, PrecisionRecallAndAUC) {
  const std::vector<float> scores = {0.9f, 0.8f, 0.6f, 0.4f, 0.3f, 0.2f, 0.7f, 0.1f};
  const std::vector<float> truth = {1, 1, 0, 1, 0, 0, 1, 0};
  const Tensor y_pred = Tensor::from_vector<float>(scores, {8, 1});
  const Tensor y_true = Tensor::from_vector<float>(truth, {8, 1});
  auto precision = train::Precision(), recall = train::Recall(), auc = train::AUC(1000);
  // Two halves: the statistics add up to the whole.
  for (int half = 0; half < 2; ++half) {
    const Tensor p = slice(y_pred, {half * 4, 0}, {4, 1}), t = slice(y_true, {half * 4, 0}, {4, 1});
    precision->update_state(t, p);
    recall->update_state(t, p);
    auc->update_state(t, p);
  }
  // Above 0.5: 0.9 (1), 0.8 (1), 0.6 (0), 0.7 (1): tp 3, fp 1; positives 4.
  EXPECT_NEAR(precision->result(), 3.0 / 4, 1e-12);
  EXPECT_NEAR(recall->result(), 3.0 / 4, 1e-12);
  // Exact ROC AUC: the fraction of (positive, negative) pairs ranked right.
  int right = 0, pairs = 0;
  for (size_t i = 0; i < 8; ++i) {
    for (size_t j = 0; j < 8; ++j) {
      if (truth[i] == 1 && truth[j] == 0) {
        ++pairs;
        right += scores[i] > scores[j];
      }
    }
  }
  EXPECT_NEAR(auc->result(), double(right) / pairs, 1e-6);
  EXPECT_LT(auc->result(), 1.0);
}

}  // namespace
}  // namespace nimbus::testing
