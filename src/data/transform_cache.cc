// cache: the first complete pass keeps the input's elements (in memory, or in
// a file of TFRecord-framed elements); later passes read them instead of the
// input. A partial pass (an iterator destroyed mid-epoch) keeps nothing.
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "nimbus/base/error.h"
#include "nimbus/data/tfrecord.h"
#include "src/data/pipeline.h"

namespace nimbus::data::detail {
namespace {

// Element file record: u32 components, then per component: u8 dtype, u8 rank,
// i64 dims[rank], the bytes.
std::string encode_element(const Element& element) {
  std::string out;
  auto put = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
  const uint32_t count = static_cast<uint32_t>(element.size());
  put(&count, 4);
  for (const Tensor& t : element) {
    const uint8_t dtype = static_cast<uint8_t>(t.dtype());
    const uint8_t rank = static_cast<uint8_t>(t.rank());
    put(&dtype, 1);
    put(&rank, 1);
    for (int64_t d : t.shape().dims()) put(&d, 8);
    put(t.raw_data(), t.nbytes());
  }
  return out;
}

Element decode_element(const std::string& record, const std::string& path, int64_t index) {
  size_t at = 0;
  auto take = [&](void* p, size_t n) {
    if (at + n > record.size()) {
      throw DataError(fmt::format("cache file '{}', element {}: record ends early (offset {} of {})", path, index, at,
                                  record.size()),
                      "delete the cache file to rebuild it");
    }
    std::memcpy(p, record.data() + at, n);
    at += n;
  };
  uint32_t count = 0;
  take(&count, 4);
  Element out;
  for (uint32_t c = 0; c < count; ++c) {
    uint8_t dtype = 0, rank = 0;
    take(&dtype, 1);
    take(&rank, 1);
    if (dtype >= kNumDTypes || rank > kMaxRank) {
      throw DataError(fmt::format("cache file '{}', element {}: bad dtype {} or rank {}", path, index, dtype, rank),
                      "delete the cache file to rebuild it");
    }
    Shape shape;
    for (int d = 0; d < rank; ++d) {
      int64_t dim = 0;
      take(&dim, 8);
      shape.push_back(dim);
    }
    Tensor t = host_tensor(shape, static_cast<DType>(dtype));
    take(t.raw_data(), t.nbytes());
    out.push_back(t);
  }
  return out;
}

struct MemoryCache {
  std::mutex mutex;
  bool complete = false;
  std::shared_ptr<const std::vector<Element>> elements;
};

class CacheNode : public UnaryNode {
 public:
  CacheNode(NodePtr input, std::string filename)
      : UnaryNode(std::move(input)), filename_(std::move(filename)), memory_(std::make_shared<MemoryCache>()) {}

  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    auto stats = node_stats(ctx, "cache");
    if (filename_.empty()) {
      std::shared_ptr<const std::vector<Element>> cached;
      {
        std::lock_guard lock(memory_->mutex);
        if (memory_->complete) cached = memory_->elements;
      }
      if (cached) return std::make_unique<MemoryReadIt>(stats, std::move(cached));
      return std::make_unique<MemoryWriteIt>(stats, memory_, make_input_iterator(*input_, ctx));
    }
    if (std::filesystem::exists(filename_)) return std::make_unique<FileReadIt>(stats, filename_);
    return std::make_unique<FileWriteIt>(stats, filename_, make_input_iterator(*input_, ctx));
  }
  int64_t cardinality() const override { return input_->cardinality(); }
  std::string describe() const override {
    return filename_.empty() ? std::string("cache(memory)") : fmt::format("cache('{}')", filename_);
  }

 private:
  class MemoryReadIt : public IteratorImpl {
   public:
    MemoryReadIt(std::shared_ptr<NodeStats> stats, std::shared_ptr<const std::vector<Element>> elements)
        : IteratorImpl(std::move(stats)), elements_(std::move(elements)) {
      this->stats().set_note(fmt::format("reading {} cached elements from memory", elements_->size()));
    }
    std::optional<Element> get_next() override {
      if (index_ >= elements_->size()) return std::nullopt;
      return (*elements_)[index_++];
    }

   private:
    std::shared_ptr<const std::vector<Element>> elements_;
    size_t index_ = 0;
  };

  class MemoryWriteIt : public IteratorImpl {
   public:
    MemoryWriteIt(std::shared_ptr<NodeStats> stats, std::shared_ptr<MemoryCache> cache,
                  std::unique_ptr<IteratorImpl> input)
        : IteratorImpl(std::move(stats)), cache_(std::move(cache)), input_(std::move(input)) {
      this->stats().set_note("first pass: filling the memory cache");
    }
    ~MemoryWriteIt() override {
      if (!committed_) stats().buffer_bytes -= bytes_;
    }
    std::optional<Element> get_next() override {
      auto element = pull(*input_);
      if (!element) {
        if (!committed_) {
          committed_ = true;
          std::lock_guard lock(cache_->mutex);
          if (!cache_->complete) {
            cache_->elements = std::make_shared<const std::vector<Element>>(std::move(elements_));
            cache_->complete = true;
          }
          stats().set_note(fmt::format("memory cache complete: {:.2f} MiB", static_cast<double>(bytes_) / 1048576.0));
        }
        return std::nullopt;
      }
      const int64_t bytes = element_bytes(*element);
      bytes_ += bytes;
      stats().buffer_bytes += bytes;
      elements_.push_back(*element);
      return element;
    }

   private:
    std::shared_ptr<MemoryCache> cache_;
    std::unique_ptr<IteratorImpl> input_;
    std::vector<Element> elements_;
    int64_t bytes_ = 0;
    bool committed_ = false;
  };

  class FileReadIt : public IteratorImpl {
   public:
    FileReadIt(std::shared_ptr<NodeStats> stats, const std::string& path)
        : IteratorImpl(std::move(stats)), path_(path), reader_(path) {
      this->stats().set_note(fmt::format("reading the cache file '{}'", path));
    }
    std::optional<Element> get_next() override {
      std::optional<std::string> record = reader_.read();
      if (!record) return std::nullopt;
      return decode_element(*record, path_, index_++);
    }

   private:
    std::string path_;
    TFRecordReader reader_;
    int64_t index_ = 0;
  };

  class FileWriteIt : public IteratorImpl {
   public:
    FileWriteIt(std::shared_ptr<NodeStats> stats, const std::string& path, std::unique_ptr<IteratorImpl> input)
        : IteratorImpl(std::move(stats)),
          path_(path),
          temp_(fmt::format("{}.tmp.{}", path, ::getpid())),
          input_(std::move(input)) {
      writer_ = std::make_unique<TFRecordWriter>(temp_);
      this->stats().set_note(fmt::format("first pass: writing the cache file '{}'", path));
    }
    ~FileWriteIt() override {
      if (writer_) {
        writer_.reset();
        std::error_code ignored;
        std::filesystem::remove(temp_, ignored);  // a partial pass leaves no cache
      }
    }
    std::optional<Element> get_next() override {
      auto element = pull(*input_);
      if (!element) {
        if (writer_) {
          writer_->close();
          writer_.reset();
          std::filesystem::rename(temp_, path_);
        }
        return std::nullopt;
      }
      if (writer_) writer_->write(encode_element(*element));
      return element;
    }

   private:
    std::string path_, temp_;
    std::unique_ptr<IteratorImpl> input_;
    std::unique_ptr<TFRecordWriter> writer_;
  };

  std::string filename_;
  std::shared_ptr<MemoryCache> memory_;
};

}  // namespace

NodePtr make_cache_node(NodePtr input, std::string filename) {
  return std::make_shared<CacheNode>(std::move(input), std::move(filename));
}

}  // namespace nimbus::data::detail
