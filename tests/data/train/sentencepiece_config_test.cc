// SentencePiece (optional in the build): `nimbus data train-tokenizer` makes a .model from text, and a text
// source with tokenizer {sentencepiece: FILE} windows its ids. Skipped, saying why, in a build without it.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "nimbus/data/sentencepiece.h"
#include "nimbus/train/config.h"
#include "nimbus/train/data_config.h"

namespace nimbus::train {
namespace {

namespace fs = std::filesystem;

// Sentences of 64 two-syllable words, in a fixed pseudo-random order.
std::string sample_text(int sentences) {
  const char* syllables[] = {"ka", "lo", "mi", "ne", "su", "ta", "ri", "po"};
  std::string text;
  uint32_t state = 12345;
  for (int s = 0; s < sentences; ++s) {
    for (int w = 0; w < 8; ++w) {
      state = state * 1664525u + 1013904223u;
      text += std::string(w ? " " : "") + syllables[(state >> 16) % 8] + syllables[(state >> 24) % 8];
    }
    text += ".\n";
  }
  return text;
}

TEST(SentencePieceConfig, TrainedTokenizerWindowsTheTextItEncodes) {
  if (!data::sentencepiece_available()) GTEST_SKIP() << "this build has no SentencePiece (libsentencepiece-dev)";
  const fs::path dir = fs::temp_directory_path() / ("nimbus_sentencepiece_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string text = sample_text(2000);
  std::ofstream(dir / "corpus.txt", std::ios::binary) << text;
  const std::string command = std::string(NIMBUS_CLI) + " data train-tokenizer " + (dir / "corpus.txt").string() +
                              " -o " + (dir / "spm").string() + " --vocab-size 400 --model-type bpe";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const std::string model = (dir / "spm.model").string();
  ASSERT_TRUE(fs::exists(model));

  const auto tokenizer = data::sentencepiece_tokenizer(model);
  EXPECT_EQ(tokenizer->vocab_size(), 400);
  const std::vector<int32_t> ids = tokenizer->encode(text);
  // 256 of the 400 pieces are byte_fallback's bytes; the rest merge syllables and words.
  EXPECT_LT(ids.size(), text.size() / 2) << "pieces no longer than bytes";
  EXPECT_EQ(tokenizer->decode(tokenizer->encode("kalo mine suta.")), "kalo mine suta.");

  const nlohmann::json config = parse_config(fmt::format(R"(model:
  input_shape: [16]
  input_dtype: int32
  layers: [{{Embedding: {{input_dim: 400, output_dim: 4}}}}]
data:
  train: {{source: text, files: "{}", tokenizer: {{sentencepiece: "{}"}}, sequence_length: 16}}
)",
                                                         (dir / "corpus.txt").string(), model),
                                             "test.yaml");
  const auto batches = dataset_from_config(config["data"]["train"], "data.train", 1, 0).collect();
  ASSERT_EQ(static_cast<int64_t>(batches.size()), (static_cast<int64_t>(ids.size()) - 17) / 16 + 1);
  for (int64_t i = 0; i < 16; ++i) {
    EXPECT_EQ(batches[3][0].data<int32_t>()[i], ids[3 * 16 + i]);
    EXPECT_EQ(batches[3][1].data<int32_t>()[i], ids[3 * 16 + i + 1]);
  }
  fs::remove_all(dir);
}

TEST(SentencePieceConfig, MissingModelIsNamed) {
  if (!data::sentencepiece_available()) GTEST_SKIP() << "this build has no SentencePiece (libsentencepiece-dev)";
  try {
    data::sentencepiece_tokenizer("/nonexistent/a.model");
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_THAT(error.message(), ::testing::HasSubstr("/nonexistent/a.model"));
  }
}

}  // namespace
}  // namespace nimbus::train
