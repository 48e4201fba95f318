// decode_raw and read_file: bytes without a codec (decode.cc has the image codecs, which a GPU-only
// build leaves out).
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "nimbus/base/error.h"
#include "nimbus/data/dataset.h"
#include "nimbus/data/decode.h"

namespace nimbus::data {

Tensor decode_raw(std::string_view bytes, DType dtype, std::vector<int64_t> dims) {
  const size_t item = dtype_size(dtype);
  auto shape_text = [&] { return Shape(std::span<const int64_t>(dims)).to_string(); };
  int unknown = -1;
  int64_t known = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == -1 && unknown < 0) {
      unknown = static_cast<int>(d);
    } else if (dims[d] < 0) {
      throw InvalidArgument("decode_raw: a shape may hold one -1 and no other negative dimension");
    } else {
      known *= dims[d];
    }
  }
  if (unknown >= 0) {
    dims[static_cast<size_t>(unknown)] = 0;
    if (known == 0 || bytes.size() % (static_cast<size_t>(known) * item) != 0) {
      throw DataError(fmt::format("decode_raw: {} bytes do not make whole {} values of shape {} (with -1 at axis {})",
                                  bytes.size(), dtype_name(dtype), shape_text(), unknown));
    }
    dims[static_cast<size_t>(unknown)] = static_cast<int64_t>(bytes.size() / (static_cast<size_t>(known) * item));
  }
  const Shape shape{std::span<const int64_t>(dims)};
  if (static_cast<size_t>(shape.numel()) * item != bytes.size()) {
    throw DataError(fmt::format("decode_raw: {} bytes, but {} of shape {} need {}", bytes.size(), dtype_name(dtype),
                                shape.to_string(), static_cast<size_t>(shape.numel()) * item),
                    "check the dtype and shape the bytes were written with");
  }
  Tensor out = host_tensor(shape, dtype);
  if (!bytes.empty()) std::memcpy(out.raw_data(), bytes.data(), bytes.size());  // x86-64: little-endian
  return out;
}

Tensor decode_raw(const Tensor& bytes, DType dtype, std::vector<int64_t> shape) {
  return decode_raw(tensor_string(bytes), dtype, std::move(shape));
}

Tensor read_file(const std::string& path) {
  // POSIX calls: an ifstream costs more than reading a small image.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw NotFound(fmt::format("read_file: cannot open '{}': {}", path, std::strerror(errno)));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    throw DataError(fmt::format("read_file: cannot stat '{}': {}", path, std::strerror(errno)));
  }
  const auto size = static_cast<size_t>(info.st_size);
  Tensor out = host_tensor(Shape{static_cast<int64_t>(size)}, DType::kU8);
  auto* dst = static_cast<char*>(out.raw_data());
  size_t done = 0;
  while (done < size) {
    const ssize_t got = ::read(fd, dst + done, size - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      throw DataError(fmt::format("read_file: '{}' ended after {} of {} bytes{}", path, done, size,
                                  got < 0 ? std::string(": ") + std::strerror(errno) : std::string()));
    }
    done += static_cast<size_t>(got);
  }
  return out;
}

}  // namespace nimbus::data
