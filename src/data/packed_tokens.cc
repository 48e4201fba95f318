// llm.c and nanoGPT token files, mapped read-only with mmap.
#include "nimbus/data/packed_tokens.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "nimbus/base/error.h"

namespace nimbus::data {
namespace {

// One file mapped whole; unmapped when the last sequence using it goes.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw NotFound(fmt::format("token file '{}': cannot open it: {}", path, std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      throw DataError(fmt::format("token file '{}': cannot stat it: {}", path, std::strerror(errno)));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (mapped == MAP_FAILED) {
        ::close(fd);
        throw DataError(fmt::format("token file '{}': cannot map it: {}", path, std::strerror(errno)));
      }
      data_ = static_cast<const unsigned char*>(mapped);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

int32_t read_int32(const unsigned char* bytes) {
  int32_t value;
  std::memcpy(&value, bytes, sizeof(value));
  return value;
}

constexpr size_t kLlmcHeaderBytes = kLlmcHeaderInts * sizeof(int32_t);

bool has_llmc_magic(const MappedFile& file) {
  return file.size() >= sizeof(int32_t) && read_int32(file.data()) == kLlmcMagic;
}

// The uint16 tokens of one file, after its header where it has one.
struct TokenSpan {
  std::shared_ptr<const MappedFile> file;
  const unsigned char* tokens;  // uint16, possibly unaligned: read with memcpy
  int64_t count;
};

TokenSpan llmc_tokens(std::shared_ptr<const MappedFile> file) {
  const std::string& path = file->path();
  if (file->size() < kLlmcHeaderBytes) {
    throw DataError(fmt::format("llm.c token file '{}': {} bytes, shorter than its {}-byte header", path, file->size(),
                                kLlmcHeaderBytes));
  }
  const int32_t magic = read_int32(file->data()), version = read_int32(file->data() + 4);
  const int64_t count = read_int32(file->data() + 8);
  if (magic != kLlmcMagic) {
    throw DataError(fmt::format("llm.c token file '{}': magic {} in its header, expected {}", path, magic, kLlmcMagic),
                    "a file without a header is nanoGPT's: format: nanogpt (or auto)");
  }
  if (version != kLlmcVersion) {
    throw DataError(fmt::format("llm.c token file '{}': version {}, this reader knows version {} (uint16 tokens)", path,
                                version, kLlmcVersion));
  }
  const size_t expected = kLlmcHeaderBytes + static_cast<size_t>(count) * 2;
  if (count < 0 || file->size() != expected) {
    throw DataError(fmt::format("llm.c token file '{}': its header says {} tokens ({} bytes with the header), the "
                                "file has {} bytes",
                                path, count, expected, file->size()),
                    "the file is truncated or was not written by llm.c's data scripts");
  }
  return {file, file->data() + kLlmcHeaderBytes, count};
}

TokenSpan nanogpt_tokens(std::shared_ptr<const MappedFile> file) {
  if (file->size() % 2 != 0) {
    throw DataError(fmt::format("nanoGPT token file '{}': {} bytes, not a whole number of uint16 tokens", file->path(),
                                file->size()),
                    "the file is truncated or not a token file");
  }
  return {file, file->data(), static_cast<int64_t>(file->size() / 2)};
}

class PackedTokens : public TokenSequence {
 public:
  PackedTokens(std::vector<TokenSpan> spans, std::string origin)
      : spans_(std::move(spans)), origin_(std::move(origin)) {
    for (const TokenSpan& span : spans_) {
      starts_.push_back(size_);
      size_ += span.count;
    }
  }
  int64_t size() const override { return size_; }
  void copy(int64_t begin, int64_t count, int32_t* out) const override {
    // The span holding `begin`, then on through the following spans.
    size_t s = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin()) - 1;
    for (int64_t offset = begin - starts_[s]; count > 0; ++s, offset = 0) {
      const int64_t n = std::min(count, spans_[s].count - offset);
      const unsigned char* src = spans_[s].tokens + offset * 2;
      for (int64_t i = 0; i < n; ++i) {
        uint16_t token;
        std::memcpy(&token, src + i * 2, 2);
        *out++ = token;
      }
      count -= n;
    }
  }
  std::string describe() const override { return fmt::format("{} tokens of {}", size_, origin_); }

 private:
  std::vector<TokenSpan> spans_;
  std::vector<int64_t> starts_;
  int64_t size_ = 0;
  std::string origin_;
};

}  // namespace

PackedTokenFormat packed_token_format(const std::string& name) {
  if (name == "auto") return PackedTokenFormat::kAuto;
  if (name == "llmc") return PackedTokenFormat::kLlmc;
  if (name == "nanogpt") return PackedTokenFormat::kNanoGpt;
  throw InvalidArgument(fmt::format("unknown token file format '{}'", name), "valid: auto, llmc, nanogpt");
}

std::shared_ptr<const TokenSequence> map_packed_tokens(const std::vector<std::string>& paths,
                                                       PackedTokenFormat format) {
  if (paths.empty()) throw InvalidArgument("map_packed_tokens: no files given");
  std::vector<TokenSpan> spans;
  int llmc_files = 0;
  for (const std::string& path : paths) {
    auto file = std::make_shared<const MappedFile>(path);
    const bool llmc =
        format == PackedTokenFormat::kLlmc || (format == PackedTokenFormat::kAuto && has_llmc_magic(*file));
    spans.push_back(llmc ? llmc_tokens(std::move(file)) : nanogpt_tokens(std::move(file)));
    llmc_files += llmc;
  }
  const std::string origin =
      paths.size() == 1 ? fmt::format("'{}' ({})", paths[0], llmc_files ? "llm.c" : "nanoGPT")
                        : fmt::format("{} token files from '{}' ({} llm.c)", paths.size(), paths[0], llmc_files);
  return std::make_shared<const PackedTokens>(std::move(spans), origin);
}

}  // namespace nimbus::data
