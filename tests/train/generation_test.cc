// nn::generate on a small randomly initialized GPT (token and position embeddings, one pre-LN
// block with causal attention and a GELU MLP, a final LayerNormalization, a Dense head): greedy
// decoding is deterministic, the KV-cached path gives the tokens and logits of recomputing the
// whole prefix (also past the context, where the window slides), top_k 1 is greedy, and at
// temperature 1 the tokens drawn follow the model's softmax.
#include "nimbus/nn/generation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "nimbus/nn/layers.h"
#include "nimbus/ops/elementwise.h"
#include "train_test_util.h"

namespace nimbus::testing {
namespace {

constexpr int64_t kGptContext = 8, kGptVocabulary = 8, kGptWidth = 8;

nn::Model tiny_gpt(bool causal = true) {
  const nn::KerasTensor ids = nn::Input({kGptContext}, DType::kI32);
  const nn::KerasTensor tokens = nn::Embedding(kGptVocabulary, kGptWidth)(ids);
  nn::KerasTensor x = nn::Add()({tokens, nn::PositionEmbedding(kGptContext)(tokens)});
  const nn::KerasTensor normed = nn::LayerNormalization()(x);
  x = nn::Add()({x, nn::MultiHeadAttention(2, 4, {.use_causal_mask = causal})({normed, normed})});
  const nn::KerasTensor mlp =
      nn::Dense(kGptWidth)(nn::Dense(4 * kGptWidth, {.activation = "gelu"})(nn::LayerNormalization()(x)));
  x = nn::Add()({x, mlp});
  nn::Model model({ids}, {nn::Dense(kGptVocabulary)(nn::LayerNormalization()(x))});
  uint64_t seed = 90;  // every weight random (biases, gammas too), large enough for uneven softmaxes
  for (const Variable& weight : model.weights()) {
    Variable target = weight;
    target.assign(random_input(weight.shape(), DType::kF32, seed++) * 0.7);
  }
  return model;
}

struct Generated {
  std::vector<int64_t> tokens;
  std::vector<std::vector<float>> logits;
};

Generated run_generate(const nn::Model& model, const std::vector<int64_t>& prompt, nn::GenerateOptions options) {
  Generated out;
  options.on_token = [&](int64_t token, const std::vector<float>& logits) {
    EXPECT_EQ(logits.size(), static_cast<size_t>(kGptVocabulary));
    out.logits.push_back(logits);
    (void)token;
  };
  out.tokens = nn::generate(model, prompt, options);
  EXPECT_EQ(out.tokens.size(), static_cast<size_t>(options.max_tokens));
  return out;
}

double max_logit_difference(const Generated& a, const Generated& b) {
  double worst = 0;
  for (size_t i = 0; i < a.logits.size(); ++i)
    for (size_t j = 0; j < a.logits[i].size(); ++j)
      worst = std::max(worst, static_cast<double>(std::abs(a.logits[i][j] - b.logits[i][j])));
  return worst;
}

TEST(Generate, GreedyIsDeterministicAndTheKvCacheMatchesRecomputingThePrefix) {
  const nn::Model model = tiny_gpt();
  const std::vector<int64_t> prompt = {3, 1, 4};
  // 3 + 8 tokens: past the context of 8, where each token is predicted from the last 8.
  const nn::GenerateOptions greedy{.max_tokens = 8, .temperature = 0};
  const Generated cached = run_generate(model, prompt, greedy);
  EXPECT_EQ(run_generate(model, prompt, greedy).tokens, cached.tokens);
  nn::GenerateOptions full = greedy;
  full.use_cache = false;
  const Generated recomputed = run_generate(model, prompt, full);
  EXPECT_EQ(cached.tokens, recomputed.tokens);
  EXPECT_LT(max_logit_difference(cached, recomputed), 1e-4);
  // The logits move from step to step (positions and tokens differ): the comparison compares something.
  double moved = 0;
  for (size_t i = 1; i < cached.logits.size(); ++i)
    for (size_t j = 0; j < cached.logits[i].size(); ++j)
      moved = std::max(moved, static_cast<double>(std::abs(cached.logits[i][j] - cached.logits[i - 1][j])));
  EXPECT_GT(moved, 0.1);

  // Sampling: the same draws give the same tokens with and without the cache, and another seed others.
  nn::GenerateOptions sampled{.max_tokens = 8, .temperature = 1.0, .seed = 5};
  const Generated sampled_cached = run_generate(model, prompt, sampled);
  sampled.use_cache = false;
  EXPECT_EQ(run_generate(model, prompt, sampled).tokens, sampled_cached.tokens);
  sampled.seed = 6;
  EXPECT_NE(run_generate(model, prompt, sampled).tokens, sampled_cached.tokens);
}

TEST(Generate, TopKOneIsGreedy) {
  const nn::Model model = tiny_gpt();
  const std::vector<int64_t> prompt = {7, 0};
  const auto greedy = nn::generate(model, prompt, {.max_tokens = 10, .temperature = 0});
  for (const uint64_t seed : {1, 2, 3}) {
    EXPECT_EQ(nn::generate(model, prompt, {.max_tokens = 10, .temperature = 1.0, .top_k = 1, .seed = seed}), greedy);
  }
}

TEST(Generate, AtTemperatureOneTokensFollowTheSoftmax) {
  const nn::Model model = tiny_gpt();
  const std::vector<int64_t> prompt = {2, 5, 6};
  // generate draws its first token with sample_token from the logits and the first 53-bit draw of
  // mt19937_64(seed), so the frequencies of that draw over many seeds are generate's.
  std::vector<float> logits;
  for (const uint64_t seed : {0, 1, 2, 3, 4, 5, 6, 7}) {
    const auto token = nn::generate(
        model, prompt,
        {.max_tokens = 1, .seed = seed, .on_token = [&](int64_t, const std::vector<float>& l) { logits = l; }});
    std::mt19937_64 random(seed);
    EXPECT_EQ(token[0], nn::sample_token(logits, {}, static_cast<double>(random() >> 11) * 0x1.0p-53)) << seed;
  }
  constexpr int kSamples = 20000;
  std::vector<int> counts(kGptVocabulary, 0);
  for (uint64_t seed = 0; seed < kSamples; ++seed) {
    std::mt19937_64 random(seed);
    ++counts[static_cast<size_t>(nn::sample_token(logits, {}, static_cast<double>(random() >> 11) * 0x1.0p-53))];
  }
  double total = 0;
  std::vector<double> softmax(kGptVocabulary);
  for (int64_t v = 0; v < kGptVocabulary; ++v) total += softmax[v] = std::exp(static_cast<double>(logits[v]));
  double chi_square = 0, smallest = 1;
  for (int64_t v = 0; v < kGptVocabulary; ++v) {
    const double p = softmax[v] / total, expected = p * kSamples;
    smallest = std::min(smallest, p);
    chi_square += (counts[v] - expected) * (counts[v] - expected) / expected;
    // Each frequency within 4.5 standard deviations, sqrt(p (1 - p) / n).
    EXPECT_LT(std::abs(counts[v] / double(kSamples) - p), 4.5 * std::sqrt(p * (1 - p) / kSamples)) << v;
  }
  // 7 degrees of freedom: P(chi^2 > 24.32) = 0.001 when the draws follow the softmax.
  EXPECT_LT(chi_square, 24.32);
  EXPECT_GT(smallest * kSamples, 5.0);        // the chi-square approximation holds: every expected count > 5
  EXPECT_LT(smallest, 0.5 / kGptVocabulary);  // and the softmax is far from uniform, so uniform draws would fail
}

TEST(Generate, SampleTokenTopPTemperatureAndBadOptions) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 at temperature 1.
  const std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  EXPECT_EQ(nn::sample_token(logits, {.temperature = 0}, 0.99), 1);
  EXPECT_EQ(nn::sample_token(logits, {}, 0.49), 1);  // cumulative in order of probability: 1, 3, 0, 2
  EXPECT_EQ(nn::sample_token(logits, {}, 0.51), 3);
  EXPECT_EQ(nn::sample_token(logits, {}, 0.96), 2);
  // top_p 0.7 keeps ids 1 and 3 (0.5 + 0.3), renormalized to 0.625 and 0.375.
  EXPECT_EQ(nn::sample_token(logits, {.top_p = 0.7}, 0.62), 1);
  EXPECT_EQ(nn::sample_token(logits, {.top_p = 0.7}, 0.63), 3);
  EXPECT_EQ(nn::sample_token(logits, {.top_p = 0.7}, 0.999), 3);
  EXPECT_EQ(nn::sample_token(logits, {.top_p = 0.4}, 0.999), 1);
  // top_k 3 with temperature 2: sqrt of 0.5, 0.3, 0.15, renormalized; the last draw lands on id 0.
  const double a = std::sqrt(0.5), b = std::sqrt(0.3), c = std::sqrt(0.15);
  EXPECT_EQ(nn::sample_token(logits, {.temperature = 2, .top_k = 3}, (a + b) / (a + b + c) + 1e-6), 0);
  EXPECT_EQ(nn::sample_token(logits, {.temperature = 2, .top_k = 3}, (a + b) / (a + b + c) - 1e-6), 3);

  const nn::Model model = tiny_gpt();
  EXPECT_THROW(nn::generate(model, {}, {}), InvalidArgument);
  EXPECT_THROW(nn::generate(model, {1}, {.temperature = -1}), InvalidArgument);
  EXPECT_THROW(nn::generate(model, {1}, {.top_k = 0}), InvalidArgument);
  EXPECT_THROW(nn::generate(model, {1}, {.top_p = 1.5}), InvalidArgument);
  const std::string non_causal = error_message([] { nn::generate(tiny_gpt(false), {1}, {.max_tokens = 1}); });
  EXPECT_NE(non_causal.find("decoding with a KV cache needs causal self-attention"), std::string::npos) << non_causal;
}

}  // namespace
}  // namespace nimbus::testing
