// Per-token metrics for language models: (N, T, V) logits with (N, T) ids. accuracy and top-k
// count every token, and perplexity is exp(total loss / total tokens) over the epoch, checked
// against values worked out by hand over two batches of different sizes.
#include <gtest/gtest.h>

#include <cmath>

#include "nimbus/train/losses.h"
#include "nimbus/train/metrics.h"
#include "train_test_util.h"

namespace nimbus::testing {
namespace {

// Logits log(p) whose softmax is p = 1/2 at `top`, 1/4 at top + 1 (mod 4) and 1/8 at the other two,
// so a token costs 1, 2 or 3 bits by where its id falls.
Tensor token_logits(const std::vector<int>& tops, const Shape& shape) {
  std::vector<float> values;
  for (int top : tops) {
    for (int c = 0; c < 4; ++c) {
      const double p = c == top ? 0.5 : c == (top + 1) % 4 ? 0.25 : 0.125;
      values.push_back(static_cast<float>(std::log(p)));
    }
  }
  return Tensor::from_vector<float>(values, shape);
}

TEST(TokenMetrics, AccuracyTopKAndPerplexityCountEveryTokenAcrossBatches) {
  // Batch 1, (2, 3) tokens: bits 1, 2, 3 / 1, 1, 2 (ids at top, top+1, other / top, top, top+1).
  const Tensor logits_1 = token_logits({0, 1, 2, 3, 0, 1}, {2, 3, 4});
  const Tensor ids_1 = Tensor::from_vector<int32_t>({0, 2, 0, 3, 0, 2}, {2, 3});
  // Batch 2, (1, 2) tokens: bits 3, 2.
  const Tensor logits_2 = token_logits({2, 3}, {1, 2, 4});
  const Tensor ids_2 = Tensor::from_vector<int32_t>({1, 0}, {1, 2});

  const train::Loss loss = train::SparseCategoricalCrossentropy({.from_logits = true});
  auto accuracy = train::get_metric("accuracy", loss);
  auto top2 = train::SparseTopKCategoricalAccuracy(2);
  auto perplexity = train::get_metric("perplexity", loss);
  ASSERT_EQ(perplexity->name(), "perplexity");
  for (auto& metric : {accuracy, top2, perplexity}) metric->update_state(ids_1, logits_1);
  EXPECT_NEAR(accuracy->result(), 3.0 / 6, 1e-12);  // the 1-bit tokens
  EXPECT_NEAR(top2->result(), 5.0 / 6, 1e-12);      // all but the 3-bit token
  EXPECT_NEAR(perplexity->result(), std::pow(2.0, 10.0 / 6), 1e-5);
  for (auto& metric : {accuracy, top2, perplexity}) metric->update_state(ids_2, logits_2);
  EXPECT_NEAR(accuracy->result(), 3.0 / 8, 1e-12);
  EXPECT_NEAR(top2->result(), 6.0 / 8, 1e-12);
  // 15 bits over 8 tokens: 2^(15/8) = 3.668, not the mean of the batches' 2^(10/6) and 2^(5/2) (4.66).
  EXPECT_NEAR(perplexity->result(), std::pow(2.0, 15.0 / 8), 1e-5);
  // Ids as (N, T, 1) count alike.
  auto again = train::get_metric("accuracy", loss);
  again->update_state(Tensor::from_vector<int32_t>({0, 2, 0, 3, 0, 2}, {2, 3, 1}), logits_1);
  EXPECT_NEAR(again->result(), 0.5, 1e-12);
}

TEST(TokenMetrics, PerplexityOfProbabilitiesAndWithoutALoss) {
  // From probabilities (from_logits false): p = 1/2 and 1/8 for the two samples, 2^((1 + 3) / 2) = 4.
  const Tensor probabilities = Tensor::from_vector<float>({0.5f, 0.5f, 0.125f, 0.875f}, {2, 2});
  auto perplexity = train::Perplexity(train::SparseCategoricalCrossentropy());
  perplexity->update_state(Tensor::from_vector<int32_t>({0, 0}, {2}), probabilities);
  EXPECT_NEAR(perplexity->result(), 4.0, 1e-5);
  EXPECT_THROW(train::Perplexity(train::Loss()), InvalidArgument);
}

}  // namespace
}  // namespace nimbus::testing
