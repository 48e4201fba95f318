// The pipeline form of `nimbus train`'s data section (train/data_config.h): every source, the map
// ops, and errors that name the key path and list the valid names.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "nimbus/base/error.h"
#include "nimbus/base/logging.h"
#include "nimbus/data/decode.h"
#include "nimbus/data/example.h"
#include "nimbus/data/tfrecord.h"
#include "nimbus/train/config.h"
#include "nimbus/train/data_config.h"

namespace nimbus::train {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;

const char* kModel = R"(model:
  input_shape: [2]
  layers:
    - Dense: {units: 2}
)";

std::filesystem::path temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("nimbus_data_config_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The InvalidArgument that parse_config throws for `data_yaml`, message and hint together.
std::string config_error(const std::string& data_yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(std::string(kModel) + data_yaml, "test.yaml", overrides);
  } catch (const Error& error) {
    return error.message() + " | " + error.hint();
  }
  ADD_FAILURE() << "no error for:\n" << data_yaml;
  return "";
}

const char* kTfrecordData = R"(data:
  train:
    source: tfrecord
    files: /nonexistent/*.tfrecord
    features: {image: {type: bytes}, label: {type: int64}}
)";

TEST(DataConfig, UnknownOpNamesItsPathAndListsTheOps) {
  const std::string error = config_error(std::string(kTfrecordData) + "    steps:\n      - flip: {}\n");
  EXPECT_THAT(error, HasSubstr("test.yaml:"));
  EXPECT_THAT(error, HasSubstr("unknown op 'flip' in data.train.steps[0]"));
  // The valid ops, sorted.
  EXPECT_THAT(error, HasSubstr("valid: convert_dtype, decode_image, decode_raw, normalize, random_crop, random_flip"));
}

TEST(DataConfig, UnknownArgumentListsTheOpsArguments) {
  const std::string error =
      config_error(std::string(kTfrecordData) + "    augment:\n      - random_crop: {hieght: 3, width: 3}\n");
  EXPECT_THAT(error, HasSubstr("unknown argument 'hieght' in data.train.augment[0].random_crop"));
  EXPECT_THAT(error, HasSubstr("valid: height, width, feature"));
}

TEST(DataConfig, MissingArgumentAndBadDtypeAreRefusedBeforeTheRun) {
  EXPECT_THAT(config_error(std::string(kTfrecordData) + "    steps:\n      - decode_raw: {dtype: uint8}\n"),
              HasSubstr("needs 'shape'"));
  EXPECT_THAT(config_error(std::string(kTfrecordData) + "    steps:\n      - convert_dtype: {dtype: float33}\n"),
              HasSubstr("unknown dtype 'float33'"));
}

TEST(DataConfig, RandomOpsBelongUnderAugment) {
  const std::string error = config_error(std::string(kTfrecordData) + "    steps:\n      - random_flip: {}\n");
  EXPECT_THAT(error, HasSubstr("data.train.steps[0].random_flip is random"));
  EXPECT_THAT(error, HasSubstr("data.train.augment"));
}

TEST(DataConfig, UnknownSplitKeyListsTheKeysBesideIt) {
  const std::string error = config_error(std::string(kTfrecordData) + "    shuffel: 100\n");
  EXPECT_THAT(error, HasSubstr("unknown key 'data.train.shuffel'"));
  EXPECT_THAT(error, HasSubstr("did you mean 'data.train.shuffle'"));
  EXPECT_THAT(error, HasSubstr("valid keys under data.train:"));
  EXPECT_THAT(error, HasSubstr("num_parallel_calls"));
}

TEST(DataConfig, UnknownSourceFeatureKeyAndComponentAreNamed) {
  EXPECT_THAT(config_error("data:\n  train: {source: parquet, files: x}\n"),
              HasSubstr("valid: csv, files, idx, text, tfrecord, tokens"));
  const std::string feature = config_error(
      "data:\n  train:\n    source: tfrecord\n    files: x\n    features: {image: {type: bytes, shpe: [1]}}\n");
  EXPECT_THAT(feature, HasSubstr("data.train.features.image"));
  EXPECT_THAT(feature, HasSubstr("valid: default, shape, type, var_len"));
  EXPECT_THAT(config_error(std::string(kTfrecordData) + "    x: pixels\n"), HasSubstr("valid: image, label"));
  EXPECT_THAT(config_error("data:\n  train: {source: idx, images: a, labels: b, files: c}\n"),
              HasSubstr("data.train.files does not apply to source idx"));
  EXPECT_THAT(config_error("data:\n  train: {source: idx, images: a, labels: b, scale: 0.5}\n"),
              HasSubstr("data.train.scale is the IDX shorthand's"));
}

TEST(DataConfig, AutotuneAndFilePatternsOverride) {
  const Json config = parse_config(std::string(kModel) + kTfrecordData, "test.yaml",
                                   {"data.train.files=/data/train-*.tfrecord.gz", "data.train.prefetch=autotune",
                                    "data.train.num_parallel_calls=2"});
  EXPECT_EQ(config["data"]["train"]["files"], "/data/train-*.tfrecord.gz");
  EXPECT_EQ(config["data"]["train"]["prefetch"], "autotune");
  EXPECT_FALSE(config["data"]["train"].contains("scale"));  // the IDX shorthand's default stays out
  EXPECT_THAT(config_error(kTfrecordData, {"data.train.prefetch=fast"}), HasSubstr("an integer or autotune"));
}

TEST(DataConfig, CsvColumnsStackIntoX) {
  const auto dir = temp_dir("csv");
  std::ofstream(dir / "rows.csv") << "a,b,name,label\n1.5,2,\"x, y\",1\n-3,4.25,z,0\n5,6,w,1\n";
  const Json split = {{"source", "csv"},
                      {"files", (dir / "*.csv").string()},
                      {"columns", Json::parse(R"([{"a": "float32"}, {"b": "float64"}, {"name": "string"},
                                                   {"label": "int64"}])")},
                      {"x", {"a", "b"}},
                      {"y", "label"}};
  check_pipeline_split(split, "data.train", [](const std::string& p) { return p; });
  const auto batches = dataset_from_config(split, "data.train", 2, 0).collect();
  ASSERT_EQ(batches.size(), 2u);  // 3 rows in batches of 2
  const Tensor& x = batches[0][0];
  ASSERT_EQ(x.shape().to_vector(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(x.data<float>()[0], 1.5f);
  EXPECT_EQ(x.data<float>()[1], 2.0f);
  EXPECT_EQ(x.data<float>()[2], -3.0f);
  EXPECT_EQ(x.data<float>()[3], 4.25f);
  EXPECT_EQ(batches[0][1].data<int64_t>()[0], 1);
  EXPECT_EQ(batches[1][0].data<float>()[1], 6.0f);
}

TEST(DataConfig, FilesDecodeImagesWithFolderLabelsAndAugment) {
  const auto dir = temp_dir("files");
  // 2 classes by folder; 8x6 RGB JPEGs.
  for (const char* folder : {"cat", "dog"}) {
    std::filesystem::create_directories(dir / folder);
    for (int i = 0; i < 3; ++i) {
      Tensor image = data::host_tensor(Shape({8, 6, 3}), DType::kU8);
      for (int64_t p = 0; p < image.numel(); ++p) image.data<uint8_t>()[p] = static_cast<uint8_t>(p * 7 + i);
      std::ofstream(dir / folder / fmt::format("{}.jpg", i), std::ios::binary) << data::encode_jpeg(image);
    }
  }
  const Json split = Json::parse(fmt::format(R"({{"source": "files", "files": "{}/*/*.jpg",
      "steps": [{{"decode_image": {{"channels": 3}}}}, {{"resize": {{"height": 6, "width": 6}}}}],
      "shuffle": 6, "augment": [{{"random_crop": {{"height": 4, "width": 5}}}}, {{"random_flip": {{}}}}],
      "num_parallel_calls": 2}})",
                                             dir.string()));
  check_pipeline_split(split, "data.train", [](const std::string& p) { return p; });
  const data::Dataset ds = dataset_from_config(split, "data.train", 6, 11);
  const auto batches = ds.collect();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0][0].shape().to_vector(), (std::vector<int64_t>{6, 4, 5, 3}));
  EXPECT_EQ(batches[0][0].dtype(), DType::kF32);  // resize's output
  std::vector<int64_t> labels(batches[0][1].data<int64_t>(), batches[0][1].data<int64_t>() + 6);
  std::sort(labels.begin(), labels.end());
  EXPECT_EQ(labels, (std::vector<int64_t>{0, 0, 0, 1, 1, 1}));  // cat = 0, dog = 1
  // Same seed and iteration: the same crops and flips, whatever the threads did.
  const auto again = dataset_from_config(split, "data.train", 6, 11).collect();
  EXPECT_EQ(std::memcmp(batches[0][0].raw_data(), again[0][0].raw_data(), batches[0][0].nbytes()), 0);
}

TEST(DataConfig, TfrecordIgnoresOtherFeaturesAndAppliesSteps) {
  const auto dir = temp_dir("tfrecord");
  {
    data::TFRecordWriter out((dir / "a.tfrecord.zlib").string(), data::Compression::kZlib);
    for (int64_t i = 0; i < 5; ++i) {
      const std::string pixels = {char(i), char(255), char(0), char(51)};
      out.write(data::serialize_example({{"id", data::BytesList{{"sample" + std::to_string(i)}}},
                                         {"image", data::BytesList{{pixels}}},
                                         {"weight", data::FloatList{{0.5f, 2.0f}}},
                                         {"label", data::Int64List{{i % 3}}}}));
    }
    out.close();
  }
  const Json split = Json::parse(fmt::format(R"({{"source": "tfrecord", "files": ["{}/*.zlib"],
      "features": {{"image": {{"type": "bytes"}}, "label": {{"type": "int64"}}}},
      "steps": [{{"decode_raw": {{"dtype": "uint8", "shape": [2, 2, 1]}}}},
                {{"convert_dtype": {{"dtype": "float32", "scale": 0.5}}}}],
      "cache": true, "prefetch": 2}})",
                                             dir.string()));
  const auto batches = dataset_from_config(split, "data.train", 5, 0).collect();
  ASSERT_EQ(batches.size(), 1u);
  const Tensor& x = batches[0][0];
  ASSERT_EQ(x.shape().to_vector(), (std::vector<int64_t>{5, 2, 2, 1}));
  EXPECT_EQ(x.data<float>()[4 * 3 + 0], 1.5f);  // sample 3's first pixel, 3 * 0.5
  EXPECT_EQ(x.data<float>()[4 * 3 + 1], 127.5f);
  EXPECT_EQ(x.data<float>()[4 * 3 + 3], 25.5f);
  EXPECT_EQ(batches[0][1].data<int64_t>()[4], 1);  // 4 % 3
}

TEST(DataConfig, BadRecordKeysAreChecked) {
  EXPECT_THAT(config_error(std::string(kTfrecordData) + "    max_bad_records: 3\n"),
              HasSubstr("data.train.max_bad_records applies only when bad records are skipped | add "
                        "data.train.ignore_errors: true"));
  EXPECT_THAT(config_error(std::string(kTfrecordData) + "    ignore_errors: true\n    max_bad_records: -1\n"),
              HasSubstr("data.train.max_bad_records must be a count >= 0, got -1"));
  EXPECT_THAT(config_error(std::string(kTfrecordData) + "    allow_non_finite: true\n"),
              HasSubstr("data.train.allow_non_finite does not apply to source tfrecord"));
}

// A shard of 6 examples {image: 4 bytes, label}; `bad` holds the records whose data CRC is broken.
std::string write_shard(const std::filesystem::path& dir, const std::set<int>& bad) {
  const std::string path = (dir / "s.tfrecord").string();
  {
    data::TFRecordWriter out(path);
    for (int64_t i = 0; i < 6; ++i) {
      out.write(data::serialize_example(
          {{"image", data::BytesList{{std::string(4, char(i))}}}, {"label", data::Int64List{{i % 2}}}}));
    }
    out.close();
  }
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t record_size = bytes.size() / 6;  // the examples are all the same size
  for (int index : bad) bytes[static_cast<size_t>(index) * record_size + 12 + 3] ^= 0x04;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

Json shard_split(const std::string& path, const std::string& extra) {
  return Json::parse(fmt::format(R"({{"source": "tfrecord", "files": "{}",
      "features": {{"image": {{"type": "bytes"}}, "label": {{"type": "int64"}}}},
      "steps": [{{"decode_raw": {{"dtype": "uint8", "shape": [4]}}}}]{}}})",
                                 path, extra));
}

TEST(DataConfig, ABadRecordStopsThePipelineNamingItAndTheKeysThatSkipIt) {
  const std::string path = write_shard(temp_dir("bad_record"), {2});
  try {
    dataset_from_config(shard_split(path, ""), "data.train", 6, 0).collect();
    FAIL() << "a bad record passed";
  } catch (const DataError& error) {
    EXPECT_THAT(error.message(), HasSubstr("TFRecord file '" + path + "', record 2 at byte offset"));
    EXPECT_THAT(error.hint(), HasSubstr("data.train.ignore_errors: true"));
    EXPECT_THAT(error.hint(), Not(HasSubstr("ignore_errors()")));
  }
}

TEST(DataConfig, IgnoreErrorsSkipsAndLogsEachBadRecordOnceUpToMaxBadRecords) {
  const std::string path = write_shard(temp_dir("skipped"), {1, 4});
  std::vector<std::string> warnings;
  const LogSink previous = set_log_sink([&](LogLevel, std::string_view m) { warnings.emplace_back(m); });
  const data::Dataset ds =
      dataset_from_config(shard_split(path, R"(, "ignore_errors": true, "max_bad_records": 2)"), "data.train", 6, 0);
  const auto batches = ds.collect();
  (void)ds.collect();  // a second epoch: the same records, not logged again
  set_log_sink(previous);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0][0].dim(0), 4);
  EXPECT_EQ(batches[0][0].data<uint8_t>()[4], 2);  // record 2's pixels follow record 0's
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_THAT(warnings[0], HasSubstr("data.train: skipped bad record (1 in this pass, at most 2)"));
  EXPECT_THAT(warnings[0], HasSubstr("record 1 at byte offset"));
  EXPECT_THAT(warnings[1], HasSubstr("record 4 at byte offset"));
  // One more than the limit stops the pass, naming the count, the limit and the last record.
  try {
    dataset_from_config(shard_split(path, R"(, "ignore_errors": true, "max_bad_records": 1)"), "data.train", 6, 0)
        .collect();
    FAIL() << "2 bad records passed max_bad_records 1";
  } catch (const DataError& error) {
    EXPECT_THAT(error.message(), HasSubstr("data.train: 2 bad records in one pass over the data, more than "
                                           "data.train.max_bad_records (1); the last: TFRecord file"));
    EXPECT_THAT(error.message(), HasSubstr("record 4"));
    EXPECT_THAT(error.hint(), HasSubstr("raise data.train.max_bad_records"));
  }
  EXPECT_EQ(split_example_count(shard_split(path, R"(, "ignore_errors": true)")), 4);
}

TEST(DataConfig, AStepErrorNamesTheRecordAndTheStep) {
  const std::string path = write_shard(temp_dir("step_error"), {});
  Json split = shard_split(path, "");
  split["steps"][0]["decode_raw"]["shape"] = {5};
  try {
    dataset_from_config(split, "data.train", 6, 0).collect();
    FAIL() << "decode_raw of the wrong size passed";
  } catch (const DataError& error) {
    EXPECT_THAT(error.message(), HasSubstr("TFRecord file '" + path +
                                           "', record 0 at byte offset 0: "
                                           "data.train.steps[0].decode_raw: decode_raw: 4 bytes"));
  }
}

}  // namespace
}  // namespace nimbus::train
