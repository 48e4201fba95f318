#include "nimbus/nn/generation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "nimbus/base/error.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/shape_ops.h"
#include "src/nn/internal/decoding_cache.h"

namespace nimbus::nn {

namespace {

using internal::DecodingCache;
using internal::DecodingScope;

void check_generate_options(const GenerateOptions& options) {
  if (options.max_tokens < 0) {
    throw InvalidArgument(fmt::format("generate: max_tokens must be >= 0, got {}", options.max_tokens));
  }
  if (!(options.temperature >= 0) || !std::isfinite(options.temperature)) {
    throw InvalidArgument(
        fmt::format("generate: temperature must be a finite number >= 0, got {}", options.temperature));
  }
  if (options.top_k && *options.top_k < 1) {
    throw InvalidArgument(fmt::format("generate: top_k must be >= 1, got {}", *options.top_k));
  }
  if (options.top_p && !(*options.top_p > 0 && *options.top_p <= 1)) {
    throw InvalidArgument(fmt::format("generate: top_p must be in (0, 1], got {}", *options.top_p));
  }
}

// The logits of the last position of `tokens` (the model's output (1, T, V)).
std::vector<float> last_logits(const Model& model, const std::vector<int64_t>& tokens, int64_t length,
                               DType input_dtype) {
  std::vector<int64_t> ids = tokens;
  ids.resize(static_cast<size_t>(length), 0);  // a causal model's outputs up to T ignore what follows
  Tensor input = Tensor::from_vector<int64_t>(ids, {1, length}).to(input_dtype);
  const std::vector<Variable> weights = model.weights();
  if (!weights.empty()) input = input.to(weights[0].value().device());  // where the model runs
  const Tensor logits = model(input, false);
  if (logits.rank() != 3 || logits.dim(0) != 1 || logits.dim(1) != length) {
    throw InvalidArgument(fmt::format("generate: model '{}' maps {} token ids to {}, not to (1, {}, vocabulary) logits",
                                      model.name(), input.shape().to_string(), logits.shape().to_string(), length),
                          "generate takes a language model: token ids (N, T) to logits (N, T, V)");
  }
  const int64_t last = static_cast<int64_t>(tokens.size()) - 1;
  return slice(logits, {0, last, 0}, {1, 1, logits.dim(2)}).to(DType::kF32).to_vector<float>();
}

}  // namespace

int64_t sample_token(const std::vector<float>& logits, const GenerateOptions& options, double uniform) {
  check_generate_options(options);
  if (logits.empty()) throw InvalidArgument("generate: no logits to sample from");
  std::vector<size_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  // Most likely first; ties keep the lower id first, so greedy picks the first maximum.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  if (options.temperature == 0) return static_cast<int64_t>(order[0]);
  size_t kept = order.size();
  if (options.top_k) kept = std::min(kept, static_cast<size_t>(*options.top_k));
  // softmax(logits / temperature) over the kept tokens, in f64.
  std::vector<double> probabilities(kept);
  const double top = logits[order[0]] / options.temperature;
  double total = 0;
  for (size_t i = 0; i < kept; ++i) total += probabilities[i] = std::exp(logits[order[i]] / options.temperature - top);
  for (double& p : probabilities) p /= total;
  if (options.top_p) {
    double cumulative = 0;
    size_t nucleus = 0;
    while (nucleus < kept && cumulative < *options.top_p) cumulative += probabilities[nucleus++];
    kept = std::max<size_t>(nucleus, 1);
    total = std::accumulate(probabilities.begin(), probabilities.begin() + static_cast<std::ptrdiff_t>(kept), 0.0);
  } else {
    total = 1;
  }
  double cumulative = 0;
  for (size_t i = 0; i < kept; ++i) {
    cumulative += probabilities[i] / total;
    if (uniform < cumulative) return static_cast<int64_t>(order[i]);
  }
  return static_cast<int64_t>(order[kept - 1]);  // uniform within rounding of 1
}

std::vector<int64_t> generate(const Model& model, const std::vector<int64_t>& prompt, const GenerateOptions& options) {
  check_generate_options(options);
  if (prompt.empty()) throw InvalidArgument("generate: the prompt is empty", "give at least one token");
  if (model.inputs().size() != 1 || model.inputs()[0].shape().size() != 2) {
    throw InvalidArgument(
        fmt::format("generate: model '{}' does not take one (batch, sequence) input of token ids", model.name()));
  }
  const int64_t declared = model.inputs()[0].shape()[1];  // -1: any length
  const DType input_dtype = model.inputs()[0].dtype();
  // The longest sequence one call sees; an unknown length has no limit.
  const auto context = static_cast<size_t>(declared > 0 ? declared : INT64_MAX);
  std::mt19937_64 random(options.seed);
  std::vector<int64_t> sequence = prompt;
  std::vector<int64_t> generated;
  DecodingCache cache;
  for (int64_t step = 0; step < options.max_tokens; ++step) {
    // The tokens the next one is predicted from: the sequence's last `context`.
    const size_t start = sequence.size() > context ? sequence.size() - context : 0;
    const std::vector<int64_t> window(sequence.begin() + static_cast<std::ptrdiff_t>(start), sequence.end());
    std::vector<float> logits;
    if (!options.use_cache) {
      logits = last_logits(model, window, declared > 0 ? declared : static_cast<int64_t>(window.size()), input_dtype);
    } else {
      // The window slid (the cache's positions no longer match): start the cache again from the window.
      if (start > 0) cache = DecodingCache();
      const size_t seen = static_cast<size_t>(cache.offset());
      const std::vector<int64_t> fresh(window.begin() + static_cast<std::ptrdiff_t>(seen), window.end());
      DecodingScope scope(cache);
      logits = last_logits(model, fresh, static_cast<int64_t>(fresh.size()), input_dtype);
      cache.advance(static_cast<int64_t>(fresh.size()));
    }
    // 53 random bits: a draw from [0, 1) that is the same on every platform.
    const double uniform = static_cast<double>(random() >> 11) * 0x1.0p-53;
    const int64_t token = sample_token(logits, options, uniform);
    if (options.on_token) options.on_token(token, logits);
    sequence.push_back(token);
    generated.push_back(token);
  }
  return generated;
}

}  // namespace nimbus::nn
