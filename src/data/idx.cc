#include "nimbus/data/idx.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "nimbus/base/error.h"
#include "nimbus/data/dataset.h"

namespace nimbus::data {
namespace {

// Reads exactly `bytes` bytes (gzip or plain, zlib tells them apart), or
// fails naming the file and where the data ran out.
class IdxReader {
 public:
  explicit IdxReader(const std::string& path) : path_(path) {
    if (!std::filesystem::exists(path)) {
      throw NotFound(
          fmt::format("IDX file '{}' does not exist", path),
          "Fashion-MNIST comes with Debian's dataset-fashion-mnist package, in " + std::string(kFashionMnistDir));
    }
    file_ = gzopen(path.c_str(), "rb");
    if (file_ == nullptr) {
      throw NotFound(fmt::format("cannot open IDX file '{}': {}", path, std::strerror(errno)));
    }
    gzbuffer(file_, 1 << 20);
  }
  ~IdxReader() {
    if (file_ != nullptr) gzclose(file_);
  }
  IdxReader(const IdxReader&) = delete;
  IdxReader& operator=(const IdxReader&) = delete;

  void read(void* dst, size_t bytes, const char* what) {
    auto* out = static_cast<unsigned char*>(dst);
    size_t done = 0;
    while (done < bytes) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(bytes - done, 1u << 30));
      const int got = gzread(file_, out + done, chunk);
      if (got < 0) {
        int code = 0;
        const char* message = gzerror(file_, &code);
        throw DataError(fmt::format("IDX file '{}': corrupt compressed data near byte {} while reading {}: {}", path_,
                                    offset_ + done, what, message));
      }
      if (got == 0) {
        throw DataError(fmt::format("IDX file '{}' is truncated: {} needs {} bytes at byte offset {}, the file ends "
                                    "at byte {}",
                                    path_, what, bytes, offset_, offset_ + done),
                        "the download or copy was cut short; fetch the file again");
      }
      done += static_cast<size_t>(got);
    }
    offset_ += bytes;
  }

  uint64_t offset() const { return offset_; }

  // Fails, as read() would, when `bytes` more cannot come from the file: all that is left of a plain
  // file, or for gzip the compressed size times deflate's largest expansion (1032:1). So a header
  // claiming gigabytes is refused before they are allocated. Call after the first read.
  void check_available(uint64_t bytes, const std::string& what) {
    const uint64_t file_bytes = std::filesystem::file_size(path_);
    const bool plain = gzdirect(file_) != 0;
    const uint64_t available = plain ? (file_bytes > offset_ ? file_bytes - offset_ : 0) : file_bytes * 1032;
    if (bytes <= available) return;
    if (plain) {
      throw DataError(fmt::format("IDX file '{}' is truncated: {} needs {} bytes at byte offset {}, the file ends at "
                                  "byte {}",
                                  path_, what, bytes, offset_, file_bytes),
                      "the download or copy was cut short, or the header is corrupt; fetch the file again");
    }
    throw DataError(fmt::format("IDX file '{}': {} needs {} bytes, more than its {} compressed bytes can hold", path_,
                                what, bytes, file_bytes),
                    "the header is corrupt, or the file was cut short; fetch the file again");
  }

 private:
  std::string path_;
  gzFile file_ = nullptr;
  uint64_t offset_ = 0;
};

uint32_t big_endian_u32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Reverses each element's bytes in place (IDX is big-endian, x86 little-endian).
void swap_bytes(unsigned char* data, size_t count, size_t width) {
  for (size_t i = 0; i < count; ++i) {
    std::reverse(data + i * width, data + (i + 1) * width);
  }
}

}  // namespace

namespace {

struct TypeCode {
  unsigned char code;
  size_t width;
  DType dtype;
};

// The magic number and the dimensions, read from `reader`; the element type's code, width and dtype.
std::pair<const TypeCode*, Shape> read_header(IdxReader& reader, const std::string& path) {
  unsigned char magic[4];
  reader.read(magic, 4, "the magic number");
  if (magic[0] != 0 || magic[1] != 0) {
    throw DataError(fmt::format("'{}' is not an IDX file: the first two bytes are {:#04x} {:#04x}, not 0x00 0x00", path,
                                magic[0], magic[1]));
  }
  static constexpr TypeCode kTypes[] = {{0x08, 1, DType::kU8},  {0x09, 1, DType::kI32}, {0x0B, 2, DType::kI32},
                                        {0x0C, 4, DType::kI32}, {0x0D, 4, DType::kF32}, {0x0E, 8, DType::kF64}};
  const TypeCode* type = nullptr;
  for (const TypeCode& t : kTypes) {
    if (t.code == magic[2]) type = &t;
  }
  if (type == nullptr) {
    throw DataError(fmt::format("IDX file '{}': unknown element type code {:#04x} at byte offset 2", path, magic[2]),
                    "IDX type codes are 0x08, 0x09, 0x0B, 0x0C, 0x0D and 0x0E");
  }
  const int rank = magic[3];
  if (rank == 0 || rank > kMaxRank) {
    throw DataError(
        fmt::format("IDX file '{}': {} dimensions at byte offset 3 (1 to {} supported)", path, rank, kMaxRank));
  }
  Shape shape;
  for (int i = 0; i < rank; ++i) {
    unsigned char dim[4];
    reader.read(dim, 4, fmt::format("dimension {}", i).c_str());
    shape.push_back(big_endian_u32(dim));
  }
  return {type, shape};
}

}  // namespace

IdxHeader read_idx_header(const std::string& path) {
  IdxReader reader(path);
  const auto [type, shape] = read_header(reader, path);
  return {shape, type->dtype};
}

Tensor read_idx(const std::string& path) {
  IdxReader reader(path);
  const auto [type, shape] = read_header(reader, path);
  // The element bytes, saturating: u32 dimensions can overflow 64 bits.
  uint64_t bytes = type->width;
  for (int64_t dim : shape.to_vector()) {
    const auto d = static_cast<uint64_t>(dim);
    bytes = d != 0 && bytes > UINT64_MAX / d ? UINT64_MAX : bytes * d;
  }
  reader.check_available(bytes, fmt::format("shape {}", shape.to_string()));
  const size_t count = static_cast<size_t>(shape.numel());
  std::vector<unsigned char> raw(count * type->width);
  reader.read(raw.data(), raw.size(), fmt::format("{} elements of shape {}", count, shape.to_string()).c_str());
  if (type->width > 1) swap_bytes(raw.data(), count, type->width);

  Tensor result = host_tensor(shape, type->dtype);
  switch (type->code) {
    case 0x09: {
      auto* dst = result.data<int32_t>();
      // IDX type 0x09 is a signed byte: the sign extension is the point.
      for (size_t i = 0; i < count; ++i) dst[i] = static_cast<int8_t>(raw[i]);  // NOLINT(bugprone-signed-char-misuse)
      break;
    }
    case 0x0B: {
      auto* dst = result.data<int32_t>();
      for (size_t i = 0; i < count; ++i) {
        int16_t v;
        std::memcpy(&v, raw.data() + 2 * i, 2);
        dst[i] = v;
      }
      break;
    }
    default: std::memcpy(result.raw_data(), raw.data(), raw.size());
  }
  return result;
}

void write_idx(const std::string& path, const Tensor& tensor) {
  unsigned char code = 0;
  switch (tensor.dtype()) {
    case DType::kU8: code = 0x08; break;
    case DType::kI32: code = 0x0C; break;
    case DType::kF32: code = 0x0D; break;
    case DType::kF64: code = 0x0E; break;
    default:
      throw InvalidArgument(
          fmt::format("write_idx('{}'): IDX cannot store {} elements", path, dtype_name(tensor.dtype())),
          "convert to u8, i32, f32 or f64 first");
  }
  if (tensor.rank() == 0) throw InvalidArgument(fmt::format("write_idx('{}'): IDX cannot store a scalar", path));
  const Tensor host = tensor.to(Device::cpu());
  std::vector<unsigned char> bytes = {0, 0, code, static_cast<unsigned char>(tensor.rank())};
  for (int64_t dim : tensor.shape()) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<unsigned char>(dim >> shift));
  }
  const size_t header = bytes.size();
  const auto* data = static_cast<const unsigned char*>(host.raw_data());
  bytes.insert(bytes.end(), data, data + host.nbytes());
  const size_t width = dtype_size(tensor.dtype());
  if (width > 1) swap_bytes(bytes.data() + header, static_cast<size_t>(tensor.numel()), width);
  // Write beside the target and rename, so a crash never leaves a torn file.
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw DataError(fmt::format("cannot write IDX file '{}'", temp));
  }
  std::filesystem::rename(temp, path);
}

}  // namespace nimbus::data
