#include "src/data/file_stream.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "nimbus/base/error.h"

namespace nimbus::data::detail {
namespace {
constexpr size_t kChunk = 1 << 18;

// zlib's window bits: 15 = zlib header, 15 + 16 = gzip header.
int window_bits(Compression compression) { return compression == Compression::kGzip ? 15 + 16 : 15; }
const char* compression_name(Compression compression) {
  switch (compression) {
    case Compression::kNone: return "plain";
    case Compression::kZlib: return "ZLIB";
    case Compression::kGzip: return "GZIP";
  }
  return "?";
}
}  // namespace

InputStream::InputStream(std::string path, Compression compression)
    : path_(std::move(path)), compression_(compression) {
  file_ = std::fopen(path_.c_str(), "rb");
  if (file_ == nullptr) {
    if (!std::filesystem::exists(path_)) throw NotFound(fmt::format("file '{}' does not exist", path_));
    throw NotFound(fmt::format("cannot open '{}': {}", path_, std::strerror(errno)));
  }
  if (compression_ != Compression::kNone) {
    if (inflateInit2(&zs_, window_bits(compression_)) != Z_OK) {
      throw InternalError(fmt::format("zlib: inflateInit2 failed for '{}'", path_));
    }
    zs_open_ = true;
    in_.resize(kChunk);
  }
}

InputStream::~InputStream() {
  if (zs_open_) inflateEnd(&zs_);
  if (file_ != nullptr) std::fclose(file_);
}

bool InputStream::refill() {
  const size_t got = std::fread(in_.data(), 1, in_.size(), file_);
  zs_.next_in = in_.data();
  zs_.avail_in = static_cast<uInt>(got);
  return got > 0;
}

size_t InputStream::read(void* dst, size_t size) {
  if (compression_ == Compression::kNone) {
    const size_t got = std::fread(dst, 1, size, file_);
    offset_ += got;
    return got;
  }
  auto* out = static_cast<unsigned char*>(dst);
  size_t done = 0;
  while (done < size && !stream_end_) {
    if (zs_.avail_in == 0 && !refill()) {
      throw DataError(fmt::format("{}: {}-compressed data ends early (at uncompressed byte offset {})", path_,
                                  compression_name(compression_), offset_ + done),
                      "the file was cut short; write or copy it again");
    }
    zs_.next_out = out + done;
    zs_.avail_out = static_cast<uInt>(std::min<size_t>(size - done, 1u << 30));
    const uInt before = zs_.avail_out;
    const int rc = inflate(&zs_, Z_NO_FLUSH);
    done += before - zs_.avail_out;
    if (rc == Z_STREAM_END) {
      // gzip allows several members back to back (cat a.gz b.gz).
      if (compression_ == Compression::kGzip && (zs_.avail_in > 0 || refill())) {
        inflateReset(&zs_);
        continue;
      }
      stream_end_ = true;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      throw DataError(fmt::format("{}: corrupt {}-compressed data near uncompressed byte offset {}: {}", path_,
                                  compression_name(compression_), offset_ + done, zs_.msg ? zs_.msg : "zlib error"),
                      "check the compression type (plain, ZLIB or GZIP) the file was written with");
    }
  }
  offset_ += done;
  return done;
}

OutputStream::OutputStream(std::string path, Compression compression)
    : path_(std::move(path)), compression_(compression) {
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr) throw NotFound(fmt::format("cannot create '{}': {}", path_, std::strerror(errno)));
  if (compression_ != Compression::kNone) {
    if (deflateInit2(&zs_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, window_bits(compression_), 8, Z_DEFAULT_STRATEGY) !=
        Z_OK) {
      throw InternalError(fmt::format("zlib: deflateInit2 failed for '{}'", path_));
    }
    zs_open_ = true;
    out_.resize(kChunk);
  }
}

OutputStream::~OutputStream() {
  if (file_ == nullptr) return;
  try {
    close();
  } catch (const Error&) {
    // A destructor cannot report; close() explicitly to see write errors.
  }
}

void OutputStream::deflate_some(int flush) {
  do {
    zs_.next_out = out_.data();
    zs_.avail_out = static_cast<uInt>(out_.size());
    const int rc = deflate(&zs_, flush);
    if (rc == Z_STREAM_ERROR) throw InternalError(fmt::format("zlib: deflate failed for '{}'", path_));
    const size_t have = out_.size() - zs_.avail_out;
    if (have > 0 && std::fwrite(out_.data(), 1, have, file_) != have) {
      throw Unavailable(fmt::format("cannot write '{}': {}", path_, std::strerror(errno)));
    }
  } while (zs_.avail_out == 0);
}

void OutputStream::write(const void* src, size_t size) {
  if (file_ == nullptr) throw InvalidArgument(fmt::format("write to '{}' after close", path_));
  if (compression_ == Compression::kNone) {
    if (size > 0 && std::fwrite(src, 1, size, file_) != size) {
      throw Unavailable(fmt::format("cannot write '{}': {}", path_, std::strerror(errno)));
    }
    return;
  }
  zs_.next_in = static_cast<Bytef*>(const_cast<void*>(src));
  zs_.avail_in = static_cast<uInt>(size);
  deflate_some(Z_NO_FLUSH);
}

void OutputStream::flush() {
  if (file_ == nullptr) return;
  if (zs_open_) deflate_some(Z_SYNC_FLUSH);
  std::fflush(file_);
}

void OutputStream::close() {
  if (file_ == nullptr) return;
  if (zs_open_) {
    zs_.avail_in = 0;
    deflate_some(Z_FINISH);
    deflateEnd(&zs_);
    zs_open_ = false;
  }
  const bool failed = std::fclose(file_) != 0;
  file_ = nullptr;
  if (failed) throw Unavailable(fmt::format("cannot finish writing '{}': {}", path_, std::strerror(errno)));
}

Compression sniff_compression(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Compression::kNone;
  unsigned char magic[2] = {0, 0};
  const size_t got = std::fread(magic, 1, 2, f);
  std::fclose(f);
  return got == 2 && magic[0] == 0x1f && magic[1] == 0x8b ? Compression::kGzip : Compression::kNone;
}

}  // namespace nimbus::data::detail
