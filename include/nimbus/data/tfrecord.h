// TFRecord files: TensorFlow's record framing, byte for byte.
//
//   TFRecordWriter out("train-0.tfrecord.gz", Compression::kGzip);
//   out.write(serialize_example({{"label", Int64List{3}}}));
//   out.close();
//   Dataset::tfrecord({"train-0.tfrecord.gz"}, Compression::kGzip)  // records as u8 strings
//
// Each record, with no file header, footer or index:
//
//   u64 length (little-endian) | u32 masked_crc32c(length bytes) | data[length] | u32 masked_crc32c(data)
//
// CRC-32C is the Castagnoli CRC (polynomial 0x1EDC6F41, reflected 0x82F63B78);
// masked_crc(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2^32). ZLIB and
// GZIP compression wrap the whole stream, not single records.
//
// Bad data is a DataError naming the file, the record index and the byte
// offset of the record (in the uncompressed stream): a bad length CRC or a
// truncated record ends the file (nothing after it can be trusted); a bad
// data CRC skips that record, so ignore_errors() goes on with the next one.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "nimbus/data/dataset.h"

namespace nimbus::data {

// CRC-32C of `data`, continuing from `crc` (0 to start).
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
inline uint32_t crc32c(std::string_view data) { return crc32c(data.data(), data.size()); }
uint32_t mask_crc(uint32_t crc);
uint32_t unmask_crc(uint32_t masked);

namespace detail {
class InputStream;
class OutputStream;
}  // namespace detail

class TFRecordWriter {
 public:
  TFRecordWriter(const std::string& path, Compression compression = Compression::kNone);
  ~TFRecordWriter();
  void write(std::string_view record);
  void flush();
  // Finishes the file; write errors surface here.
  void close();

 private:
  std::unique_ptr<detail::OutputStream> out_;
};

class TFRecordReader {
 public:
  TFRecordReader(const std::string& path, Compression compression = Compression::kNone);
  ~TFRecordReader();
  // The next record, or nullopt at the end of the file. Throws DataError
  // for bad data (see the header comment).
  std::optional<std::string> read();
  // Index of the next record, and its byte offset.
  int64_t record_index() const { return index_; }
  uint64_t offset() const { return offset_; }

 private:
  std::unique_ptr<detail::InputStream> in_;
  std::string path_;
  int64_t index_ = 0;
  uint64_t offset_ = 0;
  bool failed_ = false;
};

// "GZIP" for names ending .gz, "ZLIB" for .zlib / .zz, else none.
Compression compression_from_name(const std::string& path);

}  // namespace nimbus::data
