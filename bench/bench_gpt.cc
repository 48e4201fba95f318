// Training throughput of a small GPT (the model): token and learned
// position embeddings, 2 pre-LN decoder blocks (d_model 128, 4 heads of 32,
// causal MultiHeadAttention, feed-forward 512 with GELU, residual adds),
// a final LayerNormalization and a Dense head over a 256-byte vocabulary;
// context 128, batch 32, no dropout, AdamW 3e-4, next-byte cross-entropy on
// random windows of a byte text. Trains WARMUP steps (tracing the step),
// then STEPS timed steps, and prints one line "step_tokens_per_s X" per step;
// with --profile, also the kernels' time per op over the timed steps.
// bench/gpt_vs_torch.sh runs it beside PyTorch's nn.TransformerEncoder form.
//
//   bench_gpt TEXT_FILE [STEPS] [WARMUP] [--profile]
#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/ops/op_profile.h"
#include "nimbus/train/trainer.h"

namespace {

using namespace nimbus;

constexpr int64_t kContext = 128, kVocabulary = 256, kModel = 128, kHeads = 4, kFeedForward = 512, kLayers = 2,
                  kBatch = 32;

nn::Model small_gpt() {
  const nn::KerasTensor tokens = nn::Input({kContext}, DType::kI32, "tokens");
  const nn::KerasTensor embedded = nn::Embedding(kVocabulary, kModel)(tokens);
  nn::KerasTensor h = nn::Add()({embedded, nn::PositionEmbedding(kContext)(embedded)});
  const nn::LayerNormalizationOptions norm{.epsilon = 1e-5};
  for (int64_t layer = 0; layer < kLayers; ++layer) {
    const nn::KerasTensor a = nn::LayerNormalization(norm)(h);
    h = nn::Add()({h, nn::MultiHeadAttention(kHeads, kModel / kHeads, {.use_causal_mask = true})({a, a})});
    const nn::KerasTensor f = nn::LayerNormalization(norm)(h);
    h = nn::Add()({h, nn::Dense(kModel)(nn::Dense(kFeedForward, {.activation = "gelu"})(f))});
  }
  return nn::Model({tokens}, {nn::Dense(kVocabulary)(nn::LayerNormalization(norm)(h))});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: bench_gpt TEXT_FILE [STEPS] [WARMUP] [--profile]\n");
    return 2;
  }
  std::ifstream file(argv[1], std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (static_cast<int64_t>(text.size()) <= kContext + 1) {
    fmt::print(stderr, "bench_gpt: {} holds {} bytes; it needs more than {}\n", argv[1], text.size(), kContext + 1);
    return 2;
  }
  const int steps = argc > 2 ? std::stoi(argv[2]) : 20;
  const int warmup = argc > 3 ? std::stoi(argv[3]) : 3;
  const bool profiled = argc > 4 && std::string(argv[4]) == "--profile";

  train::Trainer trainer =
      train::compile(small_gpt(), {.optimizer = train::AdamW({.learning_rate = 3e-4}),
                                   .loss = train::SparseCategoricalCrossentropy({.from_logits = true})});
  std::mt19937_64 random(1);
  std::uniform_int_distribution<size_t> start(0, text.size() - kContext - 2);
  const auto batch = [&] {
    std::vector<int32_t> x(kBatch * kContext), y(kBatch * kContext);
    for (int64_t b = 0; b < kBatch; ++b) {
      const size_t s = start(random);
      for (int64_t t = 0; t < kContext; ++t) {
        x[b * kContext + t] = static_cast<uint8_t>(text[s + t]);
        y[b * kContext + t] = static_cast<uint8_t>(text[s + t + 1]);
      }
    }
    return std::pair{Tensor::from_vector(x, Shape{kBatch, kContext}), Tensor::from_vector(y, Shape{kBatch, kContext})};
  };
  for (int i = 0; i < warmup; ++i) {
    const auto [x, y] = batch();
    trainer.train_on_batch(x, y);
  }
  double loss = 0;
  std::optional<OpProfile> profile;
  if (profiled) profile.emplace();
  for (int i = 0; i < steps; ++i) {
    const auto [x, y] = batch();
    const auto begin = std::chrono::steady_clock::now();
    loss = trainer.train_on_batch(x, y).at("loss");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    fmt::print("step_tokens_per_s {:.1f}\n", kBatch * kContext / seconds);
  }
  if (profile) fmt::print("{}", profile->to_string());
  fmt::print("nimbus small GPT: loss {:.3f} after {} steps\n", loss, warmup + steps);
  return 0;
}
