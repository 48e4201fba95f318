// `nimbus generate` on a run directory: a tiny byte-level GPT trained for a few seconds by
// `nimbus train` (text source, AdamW with a cosine schedule and excluded variables, per-token
// accuracy and perplexity, tokens_per_sec) continues a periodic text, also past its context; greedy
// output is the same every run and without the KV cache, --top-k 1 equals it, and bad flags are refused.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/run_command.h"
#include "tiny_run.h"

namespace nimbus::testing {
namespace {

const std::string kNimbusCli = NIMBUS_CLI;

constexpr const char* kTinyGptYaml = R"(model:
  name: tiny_gpt
  input_shape: [16]
  input_dtype: int32
  layers:
    - Embedding: {name: tokens, input_dim: 256, output_dim: 32}
    - PositionEmbedding: {name: positions, sequence_length: 16}
    - Add: {name: embedded, inbound: [tokens, positions]}
    - LayerNormalization: {name: attention_norm, inbound: [embedded]}
    - MultiHeadAttention: {name: attention, num_heads: 2, key_dim: 16, use_causal_mask: true,
                          inbound: [attention_norm, attention_norm]}
    - Add: {name: attention_residual, inbound: [embedded, attention]}
    - LayerNormalization: {name: final_norm}
    - Dense: {name: logits, units: 256}
compile:
  optimizer:
    name: adamw
    weight_decay: 0.01
    exclude_from_weight_decay: [bias, gamma, beta, embeddings]
    global_clipnorm: 1.0
    learning_rate: {name: cosine_decay, initial_learning_rate: 0.0, decay_steps: 60, warmup_target: 0.01,
                    warmup_steps: 5}
  loss: {name: sparse_categorical_crossentropy, from_logits: true}
  metrics: [accuracy, perplexity]
data:
  train: {source: text, files: TEXT, tokenizer: bytes, sequence_length: 16, stride: 2, shuffle: 1000}
fit: {epochs: 1, steps_per_epoch: 60, batch_size: 16, verbose: 2}
runtime: {seed: 1}
)";

struct TrainedTinyGpt {
  TemporaryFolder folder{"nimbus_generate_cli"};
  std::string run_dir = folder / "run";
  std::string train_output;
  TrainedTinyGpt() {
    std::string text;
    for (int i = 0; i < 400; ++i) text += "abcdefgh ";
    std::ofstream(folder / "text.txt") << text;
    std::string config = kTinyGptYaml;
    config.replace(config.find("TEXT"), 4, folder / "text.txt");
    std::ofstream(folder / "gpt.yaml") << config;
    train_output = run_command(kNimbusCli + " train " + (folder / "gpt.yaml") + " --run-dir " + run_dir + " 2>&1");
  }
  std::string generate(const std::string& flags) const {
    return run_command(kNimbusCli + " generate " + run_dir + " --prompt 'abcd' " + flags + " 2>/dev/null");
  }
};

TEST(GenerateCli, GreedyContinuesTheTrainedTextTheSameEachRunAndTopKOneEqualsIt) {
  const TrainedTinyGpt run;
  ASSERT_NE(run.train_output.find("tokens/s: "), std::string::npos) << run.train_output;
  const nlohmann::json summary = nlohmann::json::parse(std::ifstream(run.run_dir + "/summary.json"));
  // 16 label tokens per window.
  EXPECT_NEAR(summary["tokens_per_sec"].get<double>(), 16 * summary["samples_per_sec"].get<double>(), 1e-6);
  const nlohmann::json& epoch = summary["epochs"].back();
  EXPECT_GT(epoch["accuracy"].get<double>(), 0.5) << summary.dump();
  // Perplexity is exp(mean token loss).
  EXPECT_NEAR(epoch["perplexity"].get<double>(), std::exp(epoch["loss"].get<double>()),
              1e-3 * epoch["perplexity"].get<double>());

  // The text's cycle, learnt; 4 + 30 tokens run past the context of 16, where the window slides.
  const std::string greedy = run.generate("--max-tokens 30 --temperature 0");
  EXPECT_EQ(greedy, "efgh abcdefgh abcdefgh abcdefg\n");
  EXPECT_EQ(run.generate("--max-tokens 30 --temperature 0"), greedy);
  EXPECT_EQ(run.generate("--max-tokens 30 --temperature 0 --no-cache"), greedy);  // the prefix recomputed
  EXPECT_EQ(run.generate("--max-tokens 30 --temperature 1 --top-k 1 --seed 3"), greedy);
  EXPECT_EQ(run.generate("--max-tokens 12 --temperature 1 --top-p 0.5 --seed 4").size(), 13u);

  const std::string refused = run_command(kNimbusCli + " generate " + run.run_dir + " --prompt x --top-k 0 2>&1");
  EXPECT_NE(refused.find("--top-k"), std::string::npos) << refused;
}

}  // namespace
}  // namespace nimbus::testing
