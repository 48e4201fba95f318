// Byte streams over files, plain or zlib/gzip-compressed, that know their
// offset (in the uncompressed stream) for error messages.
#pragma once

#include <zlib.h>

#include <cstdio>
#include <string>
#include <vector>

#include "nimbus/data/dataset.h"

namespace nimbus::data::detail {

class InputStream {
 public:
  // Opens `path`; a missing file is NotFound. kNone reads plain bytes.
  InputStream(std::string path, Compression compression);
  ~InputStream();
  InputStream(const InputStream&) = delete;
  InputStream& operator=(const InputStream&) = delete;

  // Reads up to `size` bytes; fewer only at the end of the stream. Corrupt
  // compressed data is a DataError naming the file and offset.
  size_t read(void* dst, size_t size);
  // Bytes delivered so far (uncompressed).
  uint64_t offset() const { return offset_; }
  const std::string& path() const { return path_; }

 private:
  bool refill();
  std::string path_;
  Compression compression_;
  std::FILE* file_ = nullptr;
  z_stream zs_{};
  bool zs_open_ = false;
  bool stream_end_ = false;
  std::vector<unsigned char> in_;
  uint64_t offset_ = 0;
};

class OutputStream {
 public:
  OutputStream(std::string path, Compression compression);
  ~OutputStream();  // closes (errors then are lost: call close() to see them)
  OutputStream(const OutputStream&) = delete;
  OutputStream& operator=(const OutputStream&) = delete;

  void write(const void* src, size_t size);
  void flush();
  void close();

 private:
  void deflate_some(int flush);
  std::string path_;
  Compression compression_;
  std::FILE* file_ = nullptr;
  z_stream zs_{};
  bool zs_open_ = false;
  std::vector<unsigned char> out_;
};

// kGzip for files starting with the gzip magic bytes, else kNone.
Compression sniff_compression(const std::string& path);

}  // namespace nimbus::data::detail
