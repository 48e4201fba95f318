// Text generation with a decoder-only language model: a model mapping (N, T) token ids to
// (N, T, V) logits (causal MultiHeadAttention, PositionEmbedding, position-wise layers).
//
//   std::vector<int64_t> tokens = nn::generate(model, prompt, {.max_tokens = 100, .temperature = 0.8,
//                                                              .top_k = 40, .seed = 1,
//                                                              .on_token = [](int64_t t, const auto&) { ... }});
//
// Each new token costs one step over cached keys and values (a KV cache: every causal attention
// layer keeps the keys and values of the positions seen, and the model runs on the new token
// alone). The context is the model's input length: once the sequence outgrows it, each token is
// predicted from the last `context` tokens, recomputed in full (nanoGPT's crop), as without the cache.
// The model runs eagerly in inference mode (dropout off).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "nimbus/nn/model.h"

namespace nimbus::nn {

struct GenerateOptions {
  int64_t max_tokens = 64;
  // Logits are divided by it before sampling; 0 picks the most likely token (greedy).
  double temperature = 1.0;
  // Sample among the k most likely tokens only (1: greedy).
  std::optional<int64_t> top_k{};
  // Nucleus sampling: among the fewest most likely tokens whose probabilities reach top_p, in (0, 1].
  std::optional<double> top_p{};
  uint64_t seed = 0;
  // false: recompute the whole prefix for each token (the reference the cache is tested against).
  bool use_cache = true;
  // Called with each token as it is chosen and the logits it was drawn from (before temperature).
  std::function<void(int64_t token, const std::vector<float>& logits)> on_token{};
};

// The max_tokens tokens that follow `prompt` (at least one token).
std::vector<int64_t> generate(const Model& model, const std::vector<int64_t>& prompt,
                              const GenerateOptions& options = {});

// The token options' temperature, top_k and top_p choose from one position's logits, `uniform`
// a draw from [0, 1) that picks it (the same draw picks the same token).
int64_t sample_token(const std::vector<float>& logits, const GenerateOptions& options, double uniform);

}  // namespace nimbus::nn
