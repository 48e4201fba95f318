// TFRecord framing, tf.train.Example parsing and the independent fixture.
#include "nimbus/data/tfrecord.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "nimbus/base/error.h"
#include "nimbus/data/decode.h"
#include "nimbus/data/example.h"
#include "tests/data/data_test_util.h"

namespace nimbus::data {
namespace {

using testing::TempDirTest;

TEST(Crc32c, PublishedTestVectors) {
  // RFC 3720, B.4.
  std::string zeros(32, '\0'), ones(32, '\xff'), up(32, '\0'), down(32, '\0');
  for (int i = 0; i < 32; ++i) {
    up[static_cast<size_t>(i)] = static_cast<char>(i);
    down[static_cast<size_t>(i)] = static_cast<char>(31 - i);
  }
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down), 0x113FDB5Cu);
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  // Continuing a CRC over pieces equals the CRC of the whole.
  EXPECT_EQ(crc32c("6789", 4, crc32c("12345", 5)), 0xE3069283u);
  EXPECT_EQ(unmask_crc(mask_crc(0x12345678u)), 0x12345678u);
  EXPECT_NE(mask_crc(0x12345678u), 0x12345678u);
}

class TFRecordTest : public TempDirTest {
 protected:
  std::vector<std::string> records() {
    std::vector<std::string> out = {"", "a", std::string(1000, 'x'), std::string("\0\1\2", 3)};
    for (int i = 0; i < 50; ++i) out.push_back("record " + std::to_string(i));
    return out;
  }
  void write(const std::string& name, Compression compression) {
    TFRecordWriter writer(path(name), compression);
    for (const auto& r : records()) writer.write(r);
    writer.close();
  }
  std::string bytes(const std::string& name) {
    std::ifstream in(path(name), std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  void put_bytes(const std::string& name, const std::string& data) {
    std::ofstream out(path(name), std::ios::binary);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
  }
};

TEST_F(TFRecordTest, RoundTripPlainZlibGzip) {
  for (auto [name, compression] :
       {std::pair{"plain.tfrecord", Compression::kNone}, std::pair{"z.tfrecord.zlib", Compression::kZlib},
        std::pair{"g.tfrecord.gz", Compression::kGzip}}) {
    write(name, compression);
    std::vector<std::string> got;
    for (const auto& e : Dataset::tfrecord({path(name)}, compression).collect()) got.push_back(tensor_string(e[0]));
    EXPECT_EQ(got, records()) << name;
    EXPECT_EQ(compression_from_name(name), compression);
  }
  // The plain file is exactly the framing: 16 bytes of overhead per record.
  size_t payload = 0;
  for (const auto& r : records()) payload += r.size();
  EXPECT_EQ(bytes("plain.tfrecord").size(), payload + 16 * records().size());
}

TEST_F(TFRecordTest, FramingMatchesTheSpecByteForByte) {
  TFRecordWriter writer(path("one.tfrecord"));
  writer.write("hello");
  writer.close();
  const std::string data = bytes("one.tfrecord");
  ASSERT_EQ(data.size(), 8u + 4u + 5u + 4u);
  uint64_t length;
  std::memcpy(&length, data.data(), 8);
  EXPECT_EQ(length, 5u);
  uint32_t length_crc, data_crc;
  std::memcpy(&length_crc, data.data() + 8, 4);
  std::memcpy(&data_crc, data.data() + 17, 4);
  EXPECT_EQ(length_crc, mask_crc(crc32c(data.data(), 8)));
  EXPECT_EQ(data.substr(12, 5), "hello");
  EXPECT_EQ(data_crc, mask_crc(crc32c("hello")));
}

TEST_F(TFRecordTest, BadDataCrcNamesFileRecordAndOffsetAndIsSkippable) {
  write("good.tfrecord", Compression::kNone);
  std::string data = bytes("good.tfrecord");
  // Record 2 (1000 x's) starts after record 0 (16 bytes) and record 1 (17 bytes).
  const size_t record2 = 16 + 17;
  data[record2 + 12 + 500] ^= 0x01;
  put_bytes("bad.tfrecord", data);
  Iterator it = Dataset::tfrecord({path("bad.tfrecord")}).iterator();
  it.next();
  it.next();
  try {
    it.next();
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("bad.tfrecord"), std::string::npos) << message;
    EXPECT_NE(message.find("record 2"), std::string::npos) << message;
    EXPECT_NE(message.find("byte offset " + std::to_string(record2)), std::string::npos) << message;
    EXPECT_NE(message.find("CRC32C"), std::string::npos) << message;
  }
  EXPECT_EQ(tensor_string(it.next()->at(0)), std::string("\0\1\2", 3));  // goes on with record 3
  Iterator skipping = Dataset::tfrecord({path("bad.tfrecord")}).ignore_errors().iterator();
  size_t count = 0;
  while (skipping.next()) ++count;
  EXPECT_EQ(count, records().size() - 1);
  EXPECT_NE(skipping.stats().find("skipped 1 bad elements"), std::string::npos) << skipping.stats();
}

TEST_F(TFRecordTest, WithOriginNamesTheFileRecordAndOffsetOfEachRecord) {
  write("good.tfrecord", Compression::kNone);
  std::string data = bytes("good.tfrecord");
  data[16 + 12] ^= 0x01;  // record 1's data: its CRC fails, and the record after it keeps its index
  put_bytes("bad.tfrecord", data);
  const auto elements =
      Dataset::tfrecord({path("bad.tfrecord")}, Compression::kNone, /*with_origin=*/true).ignore_errors().collect();
  ASSERT_EQ(elements.size(), records().size() - 1);
  ASSERT_EQ(elements[0].size(), 2u);
  EXPECT_EQ(tensor_string(elements[0][1]), "TFRecord file '" + path("bad.tfrecord") + "', record 0 at byte offset 0");
  EXPECT_EQ(tensor_string(elements[1][0]), std::string(1000, 'x'));
  EXPECT_EQ(tensor_string(elements[1][1]),
            "TFRecord file '" + path("bad.tfrecord") + "', record 2 at byte offset " + std::to_string(16 + 17));
}

TEST_F(TFRecordTest, BadLengthCrcAndTruncationEndTheFile) {
  write("good.tfrecord", Compression::kNone);
  std::string data = bytes("good.tfrecord");
  std::string bad_length = data;
  bad_length[16 + 8] ^= 0x40;  // record 1's length CRC
  put_bytes("badlen.tfrecord", bad_length);
  put_bytes("trunc.tfrecord", data.substr(0, 16 + 17 + 100));
  for (const char* name : {"badlen.tfrecord", "trunc.tfrecord"}) {
    Iterator it = Dataset::tfrecord({path(name), path("good.tfrecord")}).iterator();
    EXPECT_TRUE(it.next().has_value());
    if (std::string(name) == "trunc.tfrecord") {
      EXPECT_TRUE(it.next().has_value());
    }
    try {
      it.next();
      FAIL() << "expected DataError for " << name;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string(name) == "trunc.tfrecord" ? "truncated" : "length CRC32C"),
                std::string::npos)
          << e.what();
    }
    // The damaged file ends; the next file is read whole.
    size_t rest = 0;
    while (it.next()) ++rest;
    EXPECT_EQ(rest, records().size()) << name;
  }
}

TEST_F(TFRecordTest, GzipFileReadAsPlainIsAnError) {
  write("g.tfrecord.gz", Compression::kGzip);
  EXPECT_THROW(Dataset::tfrecord({path("g.tfrecord.gz")}).collect(), DataError);
}

// ---- tf.train.Example ----

TEST(Example, SerializeAndParseRoundTrip) {
  const std::string raw(784, '\x05');
  const std::string bytes = serialize_example({{"image", BytesList{{raw}}},
                                               {"label", Int64List{{-9}}},
                                               {"box", FloatList{{0.1f, 0.2f, 0.3f, 0.4f}}},
                                               {"tags", Int64List{{1, 2, 3}}}});
  Element e =
      parse_example(std::string_view(bytes),
                    {fixed("image", FeatureType::kBytes), fixed("label", FeatureType::kInt64),
                     fixed("box", FeatureType::kFloat, Shape{2, 2}), var_len("tags", FeatureType::kInt64),
                     var_len("absent", FeatureType::kFloat), fixed("weight", FeatureType::kFloat, {}, {{0.25}})});
  ASSERT_EQ(e.size(), 6u);
  EXPECT_EQ(e[0].shape(), (Shape{784}));
  EXPECT_EQ(e[0].dtype(), DType::kU8);
  EXPECT_EQ(e[1].item<int64_t>(), -9);
  EXPECT_EQ(e[2].shape(), (Shape{2, 2}));
  EXPECT_FLOAT_EQ(e[2].at<float>({1, 1}), 0.4f);
  EXPECT_EQ(e[3].to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(e[4].shape(), (Shape{0}));
  EXPECT_FLOAT_EQ(e[5].item<float>(), 0.25f);
}

TEST(Example, ErrorsNameTheFeature) {
  const std::string bytes = serialize_example({{"label", Int64List{{1, 2}}}});
  auto message_of = [&](const std::vector<FeatureSpec>& spec) {
    try {
      parse_example(std::string_view(bytes), spec);
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message_of({fixed("label", FeatureType::kInt64)}).find("'label' holds 2 values"), std::string::npos);
  EXPECT_NE(message_of({fixed("label", FeatureType::kFloat, Shape{2})}).find("holds a int64 list"), std::string::npos);
  EXPECT_NE(message_of({fixed("missing", FeatureType::kInt64)}).find("'missing' is missing"), std::string::npos);
  const std::string truncated = bytes.substr(0, bytes.size() - 3);
  EXPECT_THROW(parse_example(std::string_view(truncated), {var_len("label", FeatureType::kInt64)}), DataError);
}

TEST(Example, DecodeRaw) {
  Tensor t = decode_raw(string_tensor(std::string("\x01\x00\x00\x00\x02\x00\x00\x00", 8)), DType::kI32, {-1});
  EXPECT_EQ(t.to_vector<int>(), (std::vector<int>{1, 2}));
  EXPECT_THROW(decode_raw(std::string_view("abc"), DType::kF32, {1}), DataError);
}

// ---- the fixture written by tests/data/fixtures/make_tfrecord_fixture.py ----

std::vector<FeatureSpec> fixture_spec() {
  return {fixed("label", FeatureType::kInt64),  var_len("weights", FeatureType::kFloat),
          fixed("name", FeatureType::kBytes),   fixed("pixels", FeatureType::kBytes),
          var_len("tags", FeatureType::kInt64), var_len("image", FeatureType::kBytes)};
}

void check_fixture(const std::vector<Element>& records) {
  ASSERT_EQ(records.size(), 4u);
  // 0: packed numbers.
  EXPECT_EQ(records[0][0].item<int64_t>(), 7);
  EXPECT_EQ(records[0][1].to_vector<float>(), (std::vector<float>{0.5f, -1.25f, 3.0f}));
  EXPECT_EQ(tensor_string(records[0][2]), "first");
  EXPECT_EQ(decode_raw(records[0][3], DType::kU8, {2, 2}).to_vector<int>(), (std::vector<int>{0, 0x40, 0x80, 0xff}));
  EXPECT_EQ(records[0][4].numel(), 0);
  // 1: unpacked numbers, a negative int64, a large int64, an unknown field.
  EXPECT_EQ(records[1][0].item<int64_t>(), -3);
  EXPECT_EQ(records[1][1].to_vector<float>(), (std::vector<float>{1.0f, 2.0f, 4.0f}));
  EXPECT_EQ(tensor_string(records[1][2]), "second");
  EXPECT_EQ(records[1][4].to_vector<int64_t>(), (std::vector<int64_t>{10, 20, 30, 300000000000}));
  // 2: empty list and empty bytes; a PNG inside.
  EXPECT_EQ(records[2][0].item<int64_t>(), 0);
  EXPECT_EQ(records[2][1].numel(), 0);
  EXPECT_EQ(tensor_string(records[2][2]), "");
  Tensor image = decode_image(records[2][5]);
  EXPECT_EQ(image.shape(), (Shape{2, 3, 3}));
  EXPECT_EQ(image.to_vector<int>(),
            (std::vector<int>{255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30, 40, 50, 60, 70, 80, 90}));
  // 3: map entries in another order, a key given twice (the last wins).
  EXPECT_EQ(records[3][0].item<int64_t>(), 42);
  EXPECT_EQ(tensor_string(records[3][2]), "first");
}

const std::string kFixtureDir = "tests/data/fixtures/";

TEST(TFRecordFixture, ReadsRecordsWrittenByAnIndependentImplementation) {
  check_fixture(Dataset::tfrecord({kFixtureDir + "examples.tfrecord"}).map(parse_example_fn(fixture_spec())).collect());
}

TEST(TFRecordFixture, ReadsTheGzipVersion) {
  check_fixture(Dataset::tfrecord({kFixtureDir + "examples.tfrecord.gz"}, Compression::kGzip)
                    .map(parse_example_fn(fixture_spec()), 2)
                    .collect());
}

TEST(TFRecordFixture, OurWriterReproducesTheFixtureBytes) {
  TFRecordReader reader(kFixtureDir + "examples.tfrecord");
  std::vector<std::string> records;
  while (auto r = reader.read()) records.push_back(*r);
  ASSERT_EQ(records.size(), 4u);
  const std::string out =
      (std::filesystem::temp_directory_path() / ("nimbus_fixture_" + std::to_string(::getpid()))).string();
  {
    TFRecordWriter writer(out);
    for (const auto& r : records) writer.write(r);
    writer.close();
  }
  std::ifstream a(kFixtureDir + "examples.tfrecord", std::ios::binary), b(out, std::ios::binary);
  std::string bytes_a{std::istreambuf_iterator<char>(a), std::istreambuf_iterator<char>()};
  std::string bytes_b{std::istreambuf_iterator<char>(b), std::istreambuf_iterator<char>()};
  std::filesystem::remove(out);
  EXPECT_EQ(bytes_a, bytes_b);
}

}  // namespace
}  // namespace nimbus::data
