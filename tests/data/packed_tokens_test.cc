// Packed token files (packed_tokens.h): llm.c's headed .bin and nanoGPT's raw uint16, written here byte by
// byte and read back against plain loops; headers that lie are refused naming the file.
#include "nimbus/data/packed_tokens.h"

#include <gtest/gtest.h>

#include <fstream>

#include "data/data_test_util.h"
#include "nimbus/base/error.h"
#include "nimbus/data/token_windows.h"

namespace nimbus::data {
namespace {

class PackedTokensTest : public testing::TempDirTest {
 protected:
  static std::vector<uint16_t> tokens(int n, int salt) {
    std::vector<uint16_t> out(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) out[i] = static_cast<uint16_t>((i * 2654435761u + salt) % 50257);
    return out;
  }
  // An llm.c file: header[0..2] as given (the rest zero), then the tokens.
  std::string write_llmc(const std::string& name, const std::vector<uint16_t>& ids, int32_t magic = kLlmcMagic,
                         int32_t version = kLlmcVersion, int32_t count = -1) {
    std::vector<int32_t> header(kLlmcHeaderInts, 0);
    header[0] = magic;
    header[1] = version;
    header[2] = count < 0 ? static_cast<int32_t>(ids.size()) : count;
    std::ofstream out(path(name), std::ios::binary);
    out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size() * 4));
    out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 2));
    return path(name);
  }
  std::string write_raw(const std::string& name, const std::vector<uint16_t>& ids, bool odd_byte = false) {
    std::ofstream out(path(name), std::ios::binary);
    out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 2));
    if (odd_byte) out.put('\0');
    return path(name);
  }
  static std::vector<int32_t> all(const TokenSequence& sequence) {
    std::vector<int32_t> out(static_cast<size_t>(sequence.size()));
    sequence.copy(0, sequence.size(), out.data());
    return out;
  }
  static std::string error_of(const std::vector<std::string>& paths, PackedTokenFormat format) {
    try {
      map_packed_tokens(paths, format);
    } catch (const Error& error) {
      return error.message();
    }
    return "no error";
  }
};

TEST_F(PackedTokensTest, LlmcFileIsDetectedByItsHeader) {
  const std::vector<uint16_t> ids = tokens(1000, 1);
  const auto sequence = map_packed_tokens({write_llmc("a.bin", ids)});
  ASSERT_EQ(sequence->size(), 1000);
  EXPECT_EQ(all(*sequence), std::vector<int32_t>(ids.begin(), ids.end()));
  EXPECT_NE(sequence->describe().find("llm.c"), std::string::npos) << sequence->describe();
}

TEST_F(PackedTokensTest, RawFileIsNanoGpt) {
  const std::vector<uint16_t> ids = tokens(777, 2);
  for (PackedTokenFormat format : {PackedTokenFormat::kAuto, PackedTokenFormat::kNanoGpt}) {
    const auto sequence = map_packed_tokens({write_raw("train.bin", ids)}, format);
    EXPECT_EQ(all(*sequence), std::vector<int32_t>(ids.begin(), ids.end()));
  }
}

TEST_F(PackedTokensTest, SeveralFilesAreOneSequenceAndWindowsCrossThem) {
  const std::vector<uint16_t> a = tokens(300, 3), b = tokens(5, 4), c = tokens(401, 5);
  const auto sequence = map_packed_tokens({write_llmc("a.bin", a), write_raw("b.bin", b), write_llmc("c.bin", c)});
  std::vector<int32_t> expected(a.begin(), a.end());
  expected.insert(expected.end(), b.begin(), b.end());
  expected.insert(expected.end(), c.begin(), c.end());
  ASSERT_EQ(all(*sequence), expected);
  // Every window against the plain loop, stride 7 so that windows start inside each file.
  const std::vector<Element> windows = token_windows(sequence, 64, 7).collect();
  ASSERT_EQ(static_cast<int64_t>(windows.size()), token_window_count(706, 64, 7));
  for (size_t w = 0; w < windows.size(); ++w) {
    for (int64_t i = 0; i < 64; ++i) {
      ASSERT_EQ(windows[w][0].data<int32_t>()[i], expected[w * 7 + i]) << "window " << w;
      ASSERT_EQ(windows[w][1].data<int32_t>()[i], expected[w * 7 + i + 1]) << "window " << w;
    }
  }
}

TEST_F(PackedTokensTest, HeadersThatDoNotMatchTheFileAreRefusedNamingIt) {
  const std::vector<uint16_t> ids = tokens(100, 6);
  const std::string short_count = write_llmc("count.bin", ids, kLlmcMagic, kLlmcVersion, 101);
  EXPECT_NE(error_of({short_count}, PackedTokenFormat::kAuto).find("count.bin': its header says 101 tokens"),
            std::string::npos)
      << error_of({short_count}, PackedTokenFormat::kAuto);
  const std::string version = write_llmc("version.bin", ids, kLlmcMagic, 2);
  EXPECT_NE(error_of({version}, PackedTokenFormat::kAuto).find("version.bin': version 2"), std::string::npos);
  // Without the magic, auto reads nanoGPT; format llmc insists on the header.
  const std::string no_magic = write_raw("raw.bin", tokens(600, 7));
  EXPECT_NE(error_of({no_magic}, PackedTokenFormat::kLlmc).find("raw.bin': magic"), std::string::npos)
      << error_of({no_magic}, PackedTokenFormat::kLlmc);
  const std::string odd = write_raw("odd.bin", ids, /*odd_byte=*/true);
  EXPECT_NE(error_of({odd}, PackedTokenFormat::kNanoGpt).find("odd.bin': 201 bytes"), std::string::npos);
  const std::string tiny = write_raw("tiny.bin", {1, 2});
  EXPECT_NE(error_of({tiny}, PackedTokenFormat::kLlmc).find("shorter than its 1024-byte header"), std::string::npos);
  EXPECT_THROW(map_packed_tokens({path("missing.bin")}), NotFound);
  EXPECT_THROW(packed_token_format("gpt2"), InvalidArgument);
}

}  // namespace
}  // namespace nimbus::data
