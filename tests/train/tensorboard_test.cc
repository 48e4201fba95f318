// TensorBoard event files: decoded back with a reader written here (TFRecord framing with its
// CRC-32C, protocol-buffer wire format), and with Google's protobuf library where Debian's
// python3-protobuf is installed.
#include "nimbus/train/tensorboard.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "support/run_command.h"
#include "tiny_run.h"

namespace nimbus::testing {
namespace {

// CRC-32C bit by bit (the Castagnoli polynomial, reflected), masked as TFRecord masks it.
uint32_t masked_crc32c(const std::string& bytes) {
  uint32_t crc = 0xffffffff;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = crc & 1 ? (crc >> 1) ^ 0x82f63b78 : crc >> 1;
  }
  crc = ~crc;
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8;
}

std::vector<std::string> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  std::vector<std::string> records;
  size_t offset = 0;
  while (offset < bytes.size()) {
    EXPECT_LE(offset + 12, bytes.size());
    uint64_t length = 0;
    uint32_t length_crc = 0, data_crc = 0;
    std::memcpy(&length, bytes.data() + offset, 8);
    std::memcpy(&length_crc, bytes.data() + offset + 8, 4);
    EXPECT_EQ(length_crc, masked_crc32c(bytes.substr(offset, 8)));
    records.push_back(bytes.substr(offset + 12, length));
    std::memcpy(&data_crc, bytes.data() + offset + 12 + length, 4);
    EXPECT_EQ(data_crc, masked_crc32c(records.back()));
    offset += 12 + length + 4;
  }
  return records;
}

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<std::pair<std::string, float>> values;
};

// The wire format: (field << 3 | type) keys; types 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
struct Field {
  int number, type;
  uint64_t integer;
  std::string bytes;
};
std::vector<Field> decode(const std::string& message) {
  std::vector<Field> fields;
  size_t at = 0;
  auto varint = [&] {
    uint64_t value = 0;
    for (int shift = 0;; shift += 7) {
      const auto byte = static_cast<unsigned char>(message.at(at++));
      value |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
  };
  while (at < message.size()) {
    const uint64_t key = varint();
    Field field{static_cast<int>(key >> 3), static_cast<int>(key & 7), 0, {}};
    if (field.type == 0) field.integer = varint();
    if (field.type == 1 || field.type == 5) {
      const size_t size = field.type == 1 ? 8 : 4;
      field.bytes = message.substr(at, size);
      at += size;
    }
    if (field.type == 2) {
      const uint64_t size = varint();
      field.bytes = message.substr(at, size);
      at += size;
    }
    fields.push_back(field);
  }
  return fields;
}

Event parse_event(const std::string& record) {
  Event event;
  for (const Field& field : decode(record)) {
    if (field.number == 1 && field.type == 1)
      std::memcpy(&event.wall_time, field.bytes.data(), 8);
    else if (field.number == 2 && field.type == 0)
      event.step = static_cast<int64_t>(field.integer);
    else if (field.number == 3 && field.type == 2)
      event.file_version = field.bytes;
    else if (field.number == 5 && field.type == 2) {
      for (const Field& value : decode(field.bytes)) {
        EXPECT_EQ(value.number, 1);
        std::pair<std::string, float> scalar;
        for (const Field& part : decode(value.bytes)) {
          if (part.number == 1) scalar.first = part.bytes;
          if (part.number == 2 && part.type == 5) std::memcpy(&scalar.second, part.bytes.data(), 4);
        }
        event.values.push_back(scalar);
      }
    } else {
      ADD_FAILURE() << "unexpected field " << field.number << " of type " << field.type;
    }
  }
  return event;
}

std::string only_file_in(const std::string& folder) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) files.push_back(entry.path().string());
  EXPECT_EQ(files.size(), 1u) << folder;
  return files.empty() ? "" : files[0];
}

TEST(TensorBoard, EventFilesDecodeToTheLogs) {
  TemporaryFolder folder("nimbus_tensorboard");
  nn::Sequential model({nn::InputLayer({2}), nn::Dense(2)});
  train::Trainer trainer = train::compile(model, {.optimizer = train::SGD(), .loss = train::MeanSquaredError()});
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
  std::map<int, train::Logs> logged;
  struct Recorder : train::Callback {
    std::map<int, train::Logs>* logs;
    void on_epoch_end(train::Trainer&, int epoch, const train::Logs& l) override { (*logs)[epoch] = l; }
  };
  auto recorder = std::make_shared<Recorder>();
  recorder->logs = &logged;
  const double before = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  trainer.fit(x, x,
              {.epochs = 3,
               .batch_size = 2,
               .validation_data = {{x, x}},
               .verbose = 0,
               .callbacks = {train::TensorBoard({.log_dir = folder / "logs", .update_freq = 2}), recorder}});

  const std::string train_file = only_file_in(folder / "logs/train");
  const std::string name = std::filesystem::path(train_file).filename();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  std::vector<Event> events;
  for (const std::string& record : read_records(train_file)) events.push_back(parse_event(record));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_GE(events[0].wall_time, before - 1);
  // Every 2 steps: batch_loss at steps 2, 4, 6; epoch_loss at epochs 0, 1, 2 (Keras counts from 0).
  std::vector<std::pair<std::string, int64_t>> tags;
  for (size_t i = 1; i < events.size(); ++i) {
    ASSERT_EQ(events[i].values.size(), 1u);
    tags.emplace_back(events[i].values[0].first, events[i].step);
    if (events[i].values[0].first == "epoch_loss") {
      EXPECT_EQ(events[i].values[0].second,
                static_cast<float>(logged.at(static_cast<int>(events[i].step) + 1).at("loss")));
    }
  }
  EXPECT_EQ(tags, (std::vector<std::pair<std::string, int64_t>>{{"batch_loss", 2},
                                                                {"epoch_loss", 0},
                                                                {"batch_loss", 4},
                                                                {"epoch_loss", 1},
                                                                {"batch_loss", 6},
                                                                {"epoch_loss", 2}}));

  std::vector<Event> validation;
  for (const std::string& record : read_records(only_file_in(folder / "logs/validation"))) {
    validation.push_back(parse_event(record));
  }
  ASSERT_EQ(validation.size(), 4u);
  EXPECT_EQ(validation[3].values[0].first, "epoch_loss");
  EXPECT_EQ(validation[3].step, 2);
  EXPECT_EQ(validation[3].values[0].second, static_cast<float>(logged.at(3).at("val_loss")));

  // The same file through Google's protobuf parser.
  // Skips only on a machine set up by hand without scripts/install-deps, which installs it on every
  // machine that runs the suite (CI included): the skip names the package rather than failing obscurely.
  if (run_command("/usr/bin/python3 -c 'import google.protobuf' 2>&1 && echo ok").find("ok") == std::string::npos) {
    GTEST_SKIP() << "python3-protobuf is not installed (scripts/install-deps installs it): no cross-check";
  }
  std::istringstream lines(run_command("/usr/bin/python3 tests/train/read_tfevents.py " + train_file));
  std::string line;
  size_t index = 0;
  while (std::getline(lines, line)) {
    const nlohmann::json event = nlohmann::json::parse(line);
    ASSERT_LT(index, events.size());
    EXPECT_EQ(event["wall_time"].get<double>(), events[index].wall_time);
    EXPECT_EQ(event["step"].get<int64_t>(), events[index].step);
    EXPECT_EQ(event["file_version"], events[index].file_version);
    for (size_t v = 0; v < events[index].values.size(); ++v) {
      EXPECT_EQ(event["values"][v][0], events[index].values[v].first);
      EXPECT_EQ(event["values"][v][1].get<float>(), events[index].values[v].second);
    }
    ++index;
  }
  EXPECT_EQ(index, events.size());
}

}  // namespace
}  // namespace nimbus::testing
