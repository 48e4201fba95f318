#include "nimbus/data/idx.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "nimbus/base/error.h"

namespace nimbus::data {
namespace {

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("nimbus_idx_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  void write_bytes(const std::string& name, const std::vector<unsigned char>& bytes) const {
    std::ofstream out(path(name), std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }

  std::filesystem::path dir_;
};

// A hand-made file: u8, shape (2, 3), values 0..5.
const std::vector<unsigned char> kSmallU8 = {0, 0, 0x08, 2, 0, 0, 0, 2, 0, 0, 0, 3, 0, 1, 2, 3, 4, 5};

TEST_F(IdxTest, ReadsPlainU8) {
  write_bytes("small.idx", kSmallU8);
  const Tensor t = read_idx(path("small.idx"));
  EXPECT_EQ(t.dtype(), DType::kU8);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.to_vector<int>(), (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST_F(IdxTest, ReadsGzip) {
  gzFile file = gzopen(path("small.idx.gz").c_str(), "wb");
  ASSERT_NE(file, nullptr);
  gzwrite(file, kSmallU8.data(), static_cast<unsigned>(kSmallU8.size()));
  gzclose(file);
  EXPECT_EQ(read_idx(path("small.idx.gz")).to_vector<int>(), (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST_F(IdxTest, ReadsBigEndianWideTypes) {
  // i32 (2): -2, 258; f32 (1): 1.5 = 0x3FC00000; i16 (1): -3.
  write_bytes("i32.idx", {0, 0, 0x0C, 1, 0, 0, 0, 2, 0xFF, 0xFF, 0xFF, 0xFE, 0, 0, 1, 2});
  EXPECT_EQ(read_idx(path("i32.idx")).to_vector<int>(), (std::vector<int>{-2, 258}));
  write_bytes("f32.idx", {0, 0, 0x0D, 1, 0, 0, 0, 1, 0x3F, 0xC0, 0, 0});
  EXPECT_EQ(read_idx(path("f32.idx")).item<float>(), 1.5f);
  write_bytes("i16.idx", {0, 0, 0x0B, 1, 0, 0, 0, 1, 0xFF, 0xFD});
  EXPECT_EQ(read_idx(path("i16.idx")).item<int>(), -3);
}

TEST_F(IdxTest, WriteThenReadRoundTrips) {
  const Tensor original = Tensor::from_vector<float>({1.25f, -2, 3e-5f, 7, 8, 9}, {3, 2});
  write_idx(path("round.idx"), original);
  const Tensor back = read_idx(path("round.idx"));
  EXPECT_EQ(back.shape(), original.shape());
  EXPECT_EQ(back.to_vector<float>(), original.to_vector<float>());
}

TEST_F(IdxTest, MissingFileNamesTheFile) {
  try {
    read_idx(path("nope.idx"));
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    EXPECT_NE(std::string(e.what()).find("nope.idx"), std::string::npos) << e.what();
  }
}

TEST_F(IdxTest, TruncatedDataNamesFileAndByteOffset) {
  std::vector<unsigned char> truncated(kSmallU8.begin(), kSmallU8.end() - 2);
  write_bytes("short.idx", truncated);
  try {
    read_idx(path("short.idx"));
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("short.idx"), std::string::npos) << message;
    // The elements start at byte 12 and the file ends at byte 16.
    EXPECT_NE(message.find("byte offset 12"), std::string::npos) << message;
    EXPECT_NE(message.find("byte 16"), std::string::npos) << message;
  }
}

TEST_F(IdxTest, TruncatedHeaderAndBadMagicAreDataErrors) {
  write_bytes("header.idx", {0, 0, 0x08, 2, 0, 0});
  EXPECT_THROW(read_idx(path("header.idx")), DataError);
  write_bytes("magic.idx", {1, 2, 0x08, 1, 0, 0, 0, 1, 9});
  EXPECT_THROW(read_idx(path("magic.idx")), DataError);
  write_bytes("type.idx", {0, 0, 0x42, 1, 0, 0, 0, 1, 9});
  EXPECT_THROW(read_idx(path("type.idx")), DataError);
}

// Found by fuzz_idx (fuzz/): a header whose shape claims terabytes. It must be refused before
// anything that size is allocated, plain or gzip, and dimensions whose product overflows too.
TEST_F(IdxTest, HeaderClaimingMoreThanTheFileHoldsIsRefusedBeforeAllocating) {
  // i16 elements, rank 2: 0xf8f8f800 x 0x00000200 dimensions, then 19 bytes (the fuzzer's input).
  const std::vector<unsigned char> huge = {0,    0, 0x0b, 2, 0xf8, 0xf8, 0xf8, 0, 0, 0, 2,    0,    0,   0xff,
                                           0xff, 0, 2,    0, 2,    0xff, 0xff, 0, 2, 1, 0x2c, 0xfe, 0x70};
  write_bytes("huge.idx", huge);
  try {
    read_idx(path("huge.idx"));
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("is truncated: shape [4177065984, 512] needs 4277315567616 bytes at byte "
                                         "offset 12, the file ends at byte 27"),
              std::string::npos)
        << e.what();
  }
  // Rank 8 of 0xffffffff each: 2^256 elements, more than 64 bits can count.
  std::vector<unsigned char> overflow = {0, 0, 0x08, 8};
  for (int i = 0; i < 32; ++i) overflow.push_back(0xff);
  write_bytes("overflow.idx", overflow);
  EXPECT_THROW(read_idx(path("overflow.idx")), DataError);
  // Gzip: the limit is deflate's largest expansion of the compressed bytes.
  const std::vector<unsigned char> header = {0, 0, 0x08, 1, 0x40, 0, 0, 0};  // 1 GiB of u8 claimed
  gzFile gz = gzopen(path("huge.idx.gz").c_str(), "wb");
  gzwrite(gz, header.data(), static_cast<unsigned>(header.size()));
  gzclose(gz);
  try {
    read_idx(path("huge.idx.gz"));
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("compressed bytes can hold"), std::string::npos) << e.what();
  }
}

TEST(IdxFashionMnist, DebianPackageFilesHaveTheKnownShapes) {
  const std::string dir = kFashionMnistDir;
  const Tensor images = read_idx(dir + "/t10k-images-idx3-ubyte.gz");
  const Tensor labels = read_idx(dir + "/t10k-labels-idx1-ubyte.gz");
  EXPECT_EQ(images.shape(), (Shape{10000, 28, 28}));
  EXPECT_EQ(labels.shape(), (Shape{10000}));
  // Ten classes, each with 1,000 test images.
  std::vector<int> counts(10, 0);
  for (int label : labels.to_vector<int>()) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 10);
    ++counts[static_cast<size_t>(label)];
  }
  for (int c : counts) EXPECT_EQ(c, 1000);
}

}  // namespace
}  // namespace nimbus::data
