// File sources: text_line (lines of text files) and list_files (glob).
#include <fmt/format.h>
#include <glob.h>

#include <algorithm>
#include <set>

#include "nimbus/base/error.h"
#include "src/data/file_stream.h"
#include "src/data/pipeline.h"

namespace nimbus::data::detail {
namespace {

// Reads a stream line by line (\n, \r\n), without the line ends.
class LineReader {
 public:
  LineReader(const std::string& path) : in_(path, sniff_compression(path)) {}
  std::optional<std::string> next() {
    for (;;) {
      const size_t end = buffer_.find('\n', pos_);
      if (end != std::string::npos) {
        std::string line = buffer_.substr(pos_, end - pos_);
        pos_ = end + 1;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return line;
      }
      if (eof_) {
        if (pos_ >= buffer_.size()) return std::nullopt;
        std::string line = buffer_.substr(pos_);
        pos_ = buffer_.size();
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return line;
      }
      buffer_.erase(0, pos_);
      pos_ = 0;
      char chunk[1 << 16];
      const size_t got = in_.read(chunk, sizeof(chunk));
      if (got == 0) eof_ = true;
      buffer_.append(chunk, got);
    }
  }

 private:
  InputStream in_;
  std::string buffer_;
  size_t pos_ = 0;
  bool eof_ = false;
};

class TextLineNode : public DatasetNode {
 public:
  explicit TextLineNode(std::vector<std::string> paths) : paths_(std::move(paths)) {
    if (paths_.empty()) throw InvalidArgument("text_line: no files given");
  }
  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    return std::make_unique<It>(node_stats(ctx, "text_line"), this);
  }
  std::string describe() const override {
    return fmt::format("text_line({} files, first '{}')", paths_.size(), paths_[0]);
  }

 private:
  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, const TextLineNode* node) : IteratorImpl(std::move(stats)), node_(node) {}
    std::optional<Element> get_next() override {
      for (;;) {
        if (!reader_) {
          if (file_ >= node_->paths_.size()) return std::nullopt;
          reader_ = std::make_unique<LineReader>(node_->paths_[file_++]);
        }
        std::optional<std::string> line;
        try {
          line = reader_->next();
        } catch (const Error&) {
          reader_.reset();  // a corrupt file ends; the next call goes on with the next file
          throw;
        }
        if (!line) {
          reader_.reset();
          continue;
        }
        stats().source_reads++;
        return Element{string_tensor(*line)};
      }
    }

   private:
    const TextLineNode* node_;
    size_t file_ = 0;
    std::unique_ptr<LineReader> reader_;
  };
  std::vector<std::string> paths_;
};

class ListFilesNode : public DatasetNode {
 public:
  ListFilesNode(std::vector<std::string> patterns, bool shuffle, std::optional<uint64_t> seed)
      : patterns_(std::move(patterns)), shuffle_(shuffle), seed_(seed) {
    if (patterns_.empty()) throw InvalidArgument("list_files: no patterns given");
    std::set<std::string> found;
    for (const auto& pattern : patterns_) {
      glob_t g{};
      const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
      if (rc == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) found.insert(g.gl_pathv[i]);
      }
      globfree(&g);
      if (rc == GLOB_NOMATCH) {
        throw NotFound(fmt::format("list_files: no file matches '{}'", pattern),
                       "check the directory and the pattern (glob syntax: *, ?, [abc])");
      }
      if (rc != 0) throw Unavailable(fmt::format("list_files: cannot expand '{}' (glob error {})", pattern, rc));
    }
    files_.assign(found.begin(), found.end());  // sorted
  }
  std::unique_ptr<IteratorImpl> make_iterator(IteratorContext& ctx) const override {
    std::vector<std::string> order = files_;
    if (shuffle_) {
      const uint64_t epoch = ctx.next_epoch(this);
      Rng rng(mix_seed(mix_seed(seed_ ? *seed_ : ctx.seed, seed_ ? ctx.iteration : 0), epoch));
      for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    }
    return std::make_unique<It>(node_stats(ctx, "list_files"), std::move(order));
  }
  int64_t cardinality() const override { return static_cast<int64_t>(files_.size()); }
  std::string describe() const override {
    std::string patterns;
    for (const auto& p : patterns_) patterns += (patterns.empty() ? "" : ", ") + p;
    return fmt::format("list_files([{}], {} files, shuffle={}, seed={})", patterns, files_.size(), shuffle_,
                       seed_ ? std::to_string(*seed_) : std::string("none"));
  }

 private:
  class It : public IteratorImpl {
   public:
    It(std::shared_ptr<NodeStats> stats, std::vector<std::string> files)
        : IteratorImpl(std::move(stats)), files_(std::move(files)) {}
    std::optional<Element> get_next() override {
      if (index_ >= files_.size()) return std::nullopt;
      return Element{string_tensor(files_[index_++])};
    }

   private:
    std::vector<std::string> files_;
    size_t index_ = 0;
  };
  std::vector<std::string> patterns_;
  bool shuffle_;
  std::optional<uint64_t> seed_;
  std::vector<std::string> files_;
};

}  // namespace

NodePtr make_text_line_node(std::vector<std::string> paths) { return std::make_shared<TextLineNode>(std::move(paths)); }
NodePtr make_list_files_node(std::vector<std::string> patterns, bool shuffle, std::optional<uint64_t> seed) {
  return std::make_shared<ListFilesNode>(std::move(patterns), shuffle, seed);
}

}  // namespace nimbus::data::detail
