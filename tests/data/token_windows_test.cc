// Language-model windows (token_windows.h) over text read whole (text_files.h) and the byte tokenizer:
// each window checked against a plain loop over the tokens.
#include "nimbus/data/token_windows.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>

#include "data/data_test_util.h"
#include "nimbus/base/error.h"
#include "nimbus/data/text_files.h"
#include "nimbus/data/tokenizer.h"

namespace nimbus::data {
namespace {

using testing::TempDirTest;

std::vector<int32_t> ids_of(const Tensor& t) { return {t.data<int32_t>(), t.data<int32_t>() + t.numel()}; }

std::vector<int32_t> counting(int32_t n) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) tokens[i] = (i * 7 + 3) % 251;
  return tokens;
}

TEST(TokenWindows, WindowsWithStrideMatchAPlainLoop) {
  const std::vector<int32_t> tokens = counting(103);
  for (const auto [length, stride] : {std::pair<int64_t, int64_t>{8, 8}, {8, 3}, {10, 13}, {102, 1}, {1, 1}}) {
    const std::vector<Element> windows = token_windows(tokens_in_memory(tokens, "test"), length, stride).collect();
    std::vector<std::vector<int32_t>> expected_x, expected_y;
    for (int64_t start = 0; start + length + 1 <= 103; start += stride) {
      expected_x.emplace_back(tokens.begin() + start, tokens.begin() + start + length);
      expected_y.emplace_back(tokens.begin() + start + 1, tokens.begin() + start + length + 1);
    }
    ASSERT_EQ(windows.size(), expected_x.size()) << "length " << length << " stride " << stride;
    EXPECT_EQ(token_window_count(103, length, stride), static_cast<int64_t>(expected_x.size()));
    for (size_t i = 0; i < windows.size(); ++i) {
      ASSERT_EQ(windows[i].size(), 2u);
      EXPECT_EQ(windows[i][0].dtype(), DType::kI32);
      EXPECT_EQ(windows[i][0].shape(), Shape({length}));
      EXPECT_EQ(ids_of(windows[i][0]), expected_x[i]) << "window " << i;
      EXPECT_EQ(ids_of(windows[i][1]), expected_y[i]) << "window " << i;
    }
  }
}

TEST(TokenWindows, CardinalityIsKnownAndShortSequencesGiveNone) {
  EXPECT_EQ(token_windows(tokens_in_memory(counting(257), "t"), 256, 256).cardinality(), 1);
  EXPECT_EQ(token_windows(tokens_in_memory(counting(256), "t"), 256, 256).cardinality(), 0);
  EXPECT_EQ(token_windows(tokens_in_memory(counting(256), "t"), 256, 256).collect().size(), 0u);
  EXPECT_EQ(token_windows(tokens_in_memory(counting(1000), "t"), 100, 50).cardinality(), 18);
  EXPECT_THROW(token_windows(tokens_in_memory(counting(10), "t"), 0, 1), InvalidArgument);
  EXPECT_THROW(token_windows(tokens_in_memory(counting(10), "t"), 4, 0), InvalidArgument);
}

TEST(ByteTokenizer, EncodesEachByteAndDecodesBack) {
  const auto tokenizer = byte_tokenizer();
  EXPECT_EQ(tokenizer->vocab_size(), 256);
  const std::string text("a\xff\x00z\n", 5);
  const std::vector<int32_t> ids = tokenizer->encode(text);
  EXPECT_EQ(ids, (std::vector<int32_t>{'a', 255, 0, 'z', '\n'}));
  EXPECT_EQ(tokenizer->decode(ids), text);
  EXPECT_THROW(tokenizer->decode({256}), InvalidArgument);
}

class TextFiles : public TempDirTest {};

TEST_F(TextFiles, GzipAndPlainFilesReadAsOneStream) {
  { std::ofstream(path("a.txt"), std::ios::binary) << "first file\n"; }
  const std::string second = "second file, compressed\n";
  gzFile gz = gzopen(path("b.txt.gz").c_str(), "wb");
  gzwrite(gz, second.data(), static_cast<unsigned>(second.size()));
  gzclose(gz);
  EXPECT_EQ(read_text_file(path("b.txt.gz")), second);
  EXPECT_EQ(read_text_files({path("a.txt"), path("b.txt.gz")}), "first file\n" + second);
  EXPECT_THROW(read_text_file(path("missing.txt")), NotFound);
}

TEST_F(TextFiles, CorruptGzipIsADataErrorNamingTheFile) {
  std::string bytes = "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage, not deflate";
  { std::ofstream(path("bad.gz"), std::ios::binary) << bytes; }
  try {
    read_text_file(path("bad.gz"));
    FAIL() << "no error";
  } catch (const DataError& error) {
    EXPECT_NE(error.message().find("bad.gz"), std::string::npos) << error.message();
  }
}

}  // namespace
}  // namespace nimbus::data
