// The text and tokens sources of `nimbus train`'s data section (train/token_data_config.h): files by glob
// in sorted order, windows as batches of int32 (x, y), validation_split at file boundaries, and errors that
// name the key.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "nimbus/base/error.h"
#include "nimbus/data/packed_tokens.h"
#include "nimbus/data/sentencepiece.h"
#include "nimbus/train/config.h"
#include "nimbus/train/data_config.h"

namespace nimbus::train {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

const char* kModel = R"(model:
  input_shape: [8]
  input_dtype: int32
  layers:
    - Embedding: {input_dim: 256, output_dim: 4}
)";

class TokenSourceConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("nimbus_token_source_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return (dir_ / name).string();
  }
  Json parse(const std::string& data_yaml) { return parse_config(std::string(kModel) + data_yaml, "test.yaml"); }
  std::string error_of(const std::string& data_yaml) {
    try {
      parse(data_yaml);
    } catch (const Error& error) {
      return error.message() + " | " + error.hint();
    }
    return "no error";
  }
  std::string dir() const { return dir_.string(); }
  std::filesystem::path dir_;
};

// Row `row` of a batch of byte ids, as text.
std::string text_of(const Tensor& ids, int64_t row = 0) {
  const int64_t length = ids.dim(ids.rank() - 1);
  std::string text;
  for (int64_t i = 0; i < length; ++i) text += static_cast<char>(ids.data<int32_t>()[row * length + i]);
  return text;
}

TEST_F(TokenSourceConfig, GlobbedFilesAreOneStreamInSortedOrder) {
  write("b.txt", "BBBBBBBBBBBB");
  write("a.txt", "aaaaaaaaaaaa");
  write("skip.md", "not matched");
  const Json config = parse(fmt::format(R"(data:
  train: {{source: text, files: "{}/*.txt", sequence_length: 8, stride: 4}}
)",
                                        dir()));
  const Json& split = config["data"]["train"];
  // 24 bytes: windows of 9 at 0, 4, 8, 12.
  EXPECT_EQ(split_example_count(split), 4);
  const auto batches = dataset_from_config(split, "data.train", 3, 0).collect();
  ASSERT_EQ(batches.size(), 2u);
  const Tensor& x = batches[0][0];
  const Tensor& y = batches[0][1];
  EXPECT_EQ(x.shape(), Shape({3, 8}));
  EXPECT_EQ(x.dtype(), DType::kI32);
  EXPECT_EQ(y.dtype(), DType::kI32);
  const std::string stream = "aaaaaaaaaaaaBBBBBBBBBBBB";
  for (int64_t w = 0; w < 3; ++w) {
    EXPECT_EQ(text_of(x, w), stream.substr(w * 4, 8)) << "window " << w;
    EXPECT_EQ(text_of(y, w), stream.substr(w * 4 + 1, 8)) << "window " << w;
  }
  EXPECT_EQ(text_of(batches[1][0]), stream.substr(12, 8));
}

TEST_F(TokenSourceConfig, ValidationSplitHoldsOutWholeLastFiles) {
  write("1.txt", std::string(600, 'a'));
  write("2.txt", std::string(300, 'b'));
  write("3.txt", std::string(60, 'c'));
  write("4.txt", std::string(40, 'd'));
  const Json config = parse(fmt::format(R"(data:
  train: {{source: text, files: "{}/*.txt", sequence_length: 8, shuffle: 10, validation_split: 0.1}}
)",
                                        dir()));
  // 10% of 1000 bytes: 4.txt (40) is not enough, 3.txt and 4.txt (100) are.
  const Json& validation = config["data"]["validation"];
  EXPECT_EQ(validation["files"], Json({dir() + "/3.txt", dir() + "/4.txt"}));
  EXPECT_EQ(config["data"]["train"]["files"], Json({dir() + "/1.txt", dir() + "/2.txt"}));
  EXPECT_FALSE(config["data"]["train"].contains("validation_split"));
  EXPECT_EQ(validation["sequence_length"], 8);
  EXPECT_FALSE(validation.contains("shuffle"));
  EXPECT_EQ(split_example_count(validation, "data.validation"), (100 - 9) / 8 + 1);
  EXPECT_EQ(text_of(dataset_from_config(validation, "data.validation", 1, 0).collect().back()[1], 0),
            std::string(8, 'd'));
}

TEST_F(TokenSourceConfig, ValidationSplitInsideAFileIsRefused) {
  write("only.txt", std::string(1000, 'a'));
  const std::string error = error_of(fmt::format(R"(data:
  train: {{source: text, files: "{}/*.txt", sequence_length: 8, validation_split: 0.1}}
)",
                                                 dir()));
  EXPECT_THAT(error, HasSubstr("data.train.validation_split: 0.1 of 1 file(s) (1000 bytes) would split inside a file"));
  EXPECT_THAT(error, HasSubstr("data.validation its own files"));
}

TEST_F(TokenSourceConfig, BadKeysAreNamed) {
  const std::string files = dir() + "/*.txt";
  EXPECT_THAT(error_of("data:\n  train: {source: text, files: " + files + "}\n"),
              HasSubstr("data.train (source text) needs 'sequence_length'"));
  EXPECT_THAT(error_of("data:\n  train: {source: text, files: " + files + ", sequence_length: 0}\n"),
              HasSubstr("data.train.sequence_length must be a positive integer, got 0"));
  EXPECT_THAT(error_of("data:\n  train: {source: text, files: " + files + ", sequence_length: 8, format: llmc}\n"),
              HasSubstr("data.train.format does not apply to source text"));
  EXPECT_THAT(error_of("data:\n  train: {source: text, files: " + files + ", sequence_length: 8, tokenizer: gpt2}\n"),
              HasSubstr("unknown data.train.tokenizer 'gpt2'"));
  EXPECT_THAT(error_of("data:\n  train: {source: tokens, files: " + files + ", sequence_length: 8, format: bf16}\n"),
              HasSubstr("data.train.format: unknown token file format 'bf16'"));
  EXPECT_THAT(error_of("data:\n  train: {source: text, files: " + files +
                       ", sequence_length: 8}\n  validation: {source: text, files: " + files +
                       ", sequence_length: 8, validation_split: 0.5}\n"),
              HasSubstr("data.validation.validation_split applies to data.train only"));
  if (!data::sentencepiece_available()) {
    EXPECT_THAT(error_of("data:\n  train: {source: text, files: " + files +
                         ", sequence_length: 8, tokenizer: {sentencepiece: a.model}}\n"),
                HasSubstr("this build has no SentencePiece"));
  }
}

TEST_F(TokenSourceConfig, FilesWithoutMatchOrTooShortNameTheKey) {
  const Json config = parse("data:\n  train: {source: text, files: " + dir() + "/none-*.txt, sequence_length: 8}\n");
  try {
    dataset_from_config(config["data"]["train"], "data.train", 2, 0);
    FAIL() << "no error";
  } catch (const NotFound& error) {
    EXPECT_THAT(error.message(), HasSubstr("data.train.files"));
  }
  write("short.txt", "12345678");
  const Json short_config =
      parse("data:\n  train: {source: text, files: " + dir() + "/short.txt, sequence_length: 8}\n");
  try {
    dataset_from_config(short_config["data"]["train"], "data.train", 2, 0);
    FAIL() << "no error";
  } catch (const DataError& error) {
    EXPECT_THAT(error.message(), HasSubstr("data.train: 8 tokens, fewer than one window of sequence_length + 1 = 9"));
  }
}

TEST_F(TokenSourceConfig, TokensSourceReadsLlmcAndNanoGptFiles) {
  std::vector<uint16_t> ids(40);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint16_t>(1000 + i);
  {
    std::ofstream out(dir_ / "raw.bin", std::ios::binary);
    out.write(reinterpret_cast<const char*>(ids.data()), 80);
  }
  const Json config = parse("data:\n  train: {source: tokens, files: " + dir() +
                            "/raw.bin, format: nanogpt, sequence_length: 8, stride: 8}\n");
  const auto batches = dataset_from_config(config["data"]["train"], "data.train", 8, 0).collect();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0][0].shape(), Shape({4, 8}));
  EXPECT_EQ(batches[0][0].data<int32_t>()[8], 1008);
  EXPECT_EQ(batches[0][1].data<int32_t>()[8], 1009);
  // A header that lies is a DataError naming the key and the file.
  std::vector<int32_t> header(data::kLlmcHeaderInts, 0);
  header[0] = data::kLlmcMagic;
  header[1] = 1;
  header[2] = 41;
  {
    std::ofstream out(dir_ / "lying.bin", std::ios::binary);
    out.write(reinterpret_cast<const char*>(header.data()), 1024);
    out.write(reinterpret_cast<const char*>(ids.data()), 80);
  }
  const Json lying = parse("data:\n  train: {source: tokens, files: " + dir() + "/lying.bin, sequence_length: 8}\n");
  try {
    dataset_from_config(lying["data"]["train"], "data.train", 8, 0);
    FAIL() << "no error";
  } catch (const DataError& error) {
    EXPECT_THAT(error.message(), HasSubstr("data.train.files: llm.c token file"));
    EXPECT_THAT(error.message(), HasSubstr("lying.bin': its header says 41 tokens"));
  }
}

}  // namespace
}  // namespace nimbus::train
