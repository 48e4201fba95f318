// TFRecord framing (reader, writer, CRC-32C) and the tfrecord dataset source.
#include "nimbus/data/tfrecord.h"

#include <fmt/format.h>

#include <array>
#include <cstring>

#include "nimbus/base/error.h"
#include "src/data/file_stream.h"
#include "src/data/pipeline.h"

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

namespace nimbus::data {
namespace {

constexpr uint32_t kMaskDelta = 0xa282ead8u;

#if !defined(__SSE4_2__)
std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}
#endif

void put_u64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint32_t get_u32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
#if defined(__SSE4_2__)
  uint64_t c64 = c;
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c64 = _mm_crc32_u64(c64, word);
    p += 8;
    size -= 8;
  }
  c = static_cast<uint32_t>(c64);
  while (size-- > 0) c = _mm_crc32_u8(c, *p++);
#else
  static const std::array<uint32_t, 256> table = make_crc_table();
  while (size-- > 0) c = table[(c ^ *p++) & 0xff] ^ (c >> 8);
#endif
  return ~c;
}

uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }
uint32_t unmask_crc(uint32_t masked) {
  const uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

Compression compression_from_name(const std::string& path) {
  auto ends_with = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".gz")) return Compression::kGzip;
  if (ends_with(".zlib") || ends_with(".zz")) return Compression::kZlib;
  return Compression::kNone;
}

// ---- writer ----

TFRecordWriter::TFRecordWriter(const std::string& path, Compression compression)
    : out_(std::make_unique<detail::OutputStream>(path, compression)) {}
TFRecordWriter::~TFRecordWriter() = default;

void TFRecordWriter::write(std::string_view record) {
  unsigned char header[12];
  put_u64(header, record.size());
  put_u32(header + 8, mask_crc(crc32c(header, 8)));
  unsigned char footer[4];
  put_u32(footer, mask_crc(crc32c(record)));
  out_->write(header, sizeof(header));
  out_->write(record.data(), record.size());
  out_->write(footer, sizeof(footer));
}
void TFRecordWriter::flush() { out_->flush(); }
void TFRecordWriter::close() { out_->close(); }

// ---- reader ----

TFRecordReader::TFRecordReader(const std::string& path, Compression compression)
    : in_(std::make_unique<detail::InputStream>(path, compression)), path_(path) {}
TFRecordReader::~TFRecordReader() = default;

std::optional<std::string> TFRecordReader::read() {
  if (failed_) return std::nullopt;
  const uint64_t start = offset_;
  const int64_t index = index_;
  auto fail = [&](std::string what, std::string hint) {
    failed_ = true;
    return DataError(fmt::format("TFRecord file '{}', record {} at byte offset {}: {}", path_, index, start, what),
                     std::move(hint));
  };
  unsigned char header[12];
  size_t got = 0;
  try {
    got = in_->read(header, sizeof(header));
  } catch (const DataError& e) {
    throw fail(e.message(), "the compressed stream is corrupt: check the compression type");
  }
  if (got == 0) return std::nullopt;
  if (got < sizeof(header)) {
    throw fail(fmt::format("truncated: the 12-byte record header ends after {} bytes", got),
               "the file was cut short (an interrupted write or copy)");
  }
  const uint64_t length = get_u64(header);
  const uint32_t stored_length_crc = get_u32(header + 8);
  if (unmask_crc(stored_length_crc) != crc32c(header, 8)) {
    throw fail(fmt::format("length CRC32C mismatch (stored masked 0x{:08x}, computed 0x{:08x})", stored_length_crc,
                           mask_crc(crc32c(header, 8))),
               "the file is corrupt or not a TFRecord file (compressed files need Compression::kGzip or kZlib)");
  }
  std::string data;
  try {
    data.resize(length);
    got = length > 0 ? in_->read(data.data(), length) : 0;
  } catch (const std::bad_alloc&) {
    throw fail(fmt::format("record length {} cannot be allocated", length), "the file is corrupt");
  } catch (const DataError& e) {
    throw fail(e.message(), "the compressed stream is corrupt");
  }
  if (got < length) {
    throw fail(fmt::format("truncated: the record holds {} bytes, the file ends after {}", length, got),
               "the file was cut short (an interrupted write or copy)");
  }
  unsigned char footer[4];
  got = in_->read(footer, sizeof(footer));
  if (got < sizeof(footer)) throw fail("truncated: the data CRC is missing", "the file was cut short");
  offset_ = in_->offset();
  index_++;
  const uint32_t stored = get_u32(footer);
  if (unmask_crc(stored) != crc32c(data)) {
    // The length was good, so the next record starts where we are: go on.
    throw DataError(fmt::format("TFRecord file '{}', record {} at byte offset {}: data CRC32C mismatch (stored masked "
                                "0x{:08x}, computed 0x{:08x})",
                                path_, index, start, stored, mask_crc(crc32c(data))),
                    "the record is damaged (a bad disk, copy or transfer): rewrite the file");
  }
  return data;
}

// ---- dataset source ----

namespace detail {
namespace {

class TFRecordNode : public DatasetNode {
 public:
  TFRecordNode(std::vector<std::string> paths, Compression compression, bool with_origin)
      : paths_(std::move(paths)), compression_(compression), with_origin_(with_origin) {
    if (paths_.empty()) throw InvalidArgument("tfrecord: no files given");
  }
  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    return std::make_unique<It>(node_stats(ctx, "tfrecord"), this);
  }
  std::string describe() const override {
    return fmt::format("tfrecord({} files, first '{}', compression={}{})", paths_.size(), paths_[0],
                       static_cast<int>(compression_), with_origin_ ? ", with origin" : "");
  }

 private:
  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, const TFRecordNode* node) : IteratorImpl(std::move(stats)), node_(node) {}
    std::optional<Element> get_next() override {
      for (;;) {
        if (!reader_) {
          if (file_ >= node_->paths_.size()) return std::nullopt;
          const std::string& path = node_->paths_[file_++];
          path_ = &path;
          reader_ = std::make_unique<TFRecordReader>(path, node_->compression_);  // NotFound moves on to the next file
        }
        const int64_t index = reader_->record_index();
        const uint64_t offset = reader_->offset();
        std::optional<std::string> record = reader_->read();
        if (!record) {
          reader_.reset();
          continue;
        }
        stats().source_reads++;
        if (!node_->with_origin_) return Element{string_tensor(*record)};
        return Element{
            string_tensor(*record),
            string_tensor(fmt::format("TFRecord file '{}', record {} at byte offset {}", *path_, index, offset))};
      }
    }

   private:
    const TFRecordNode* node_;
    size_t file_ = 0;
    const std::string* path_ = nullptr;  // the file reader_ reads
    std::unique_ptr<TFRecordReader> reader_;
  };
  std::vector<std::string> paths_;
  Compression compression_;
  bool with_origin_;
};

}  // namespace

NodePtr make_tfrecord_node(std::vector<std::string> paths, Compression compression, bool with_origin) {
  return std::make_shared<TFRecordNode>(std::move(paths), compression, with_origin);
}

}  // namespace detail
}  // namespace nimbus::data
