#include "nimbus/tensor/safetensors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "nimbus/base/error.h"

namespace nimbus {

namespace {

// safetensors' dtype names; the host is little-endian (x86-64, aarch64), as the format is.
const std::pair<DType, const char*> kNames[] = {{DType::kF32, "F32"},   {DType::kF64, "F64"},  {DType::kF16, "F16"},
                                                {DType::kBF16, "BF16"}, {DType::kI32, "I32"},  {DType::kI64, "I64"},
                                                {DType::kU8, "U8"},     {DType::kBool, "BOOL"}};

const char* safetensors_dtype(DType dtype) {
  for (const auto& [d, name] : kNames) {
    if (d == dtype) return name;
  }
  NIMBUS_ASSERT(false) << "no safetensors name for a dtype";
  return "";
}

DType nimbus_dtype(const std::string& name, const std::string& path, const std::string& tensor) {
  for (const auto& [d, n] : kNames) {
    if (name == n) return d;
  }
  throw DataError(fmt::format("{}: tensor '{}' has dtype {}, which Nimbus does not read", path, tensor, name));
}

void write_all(int fd, const void* data, size_t size, const std::string& path) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd, bytes, size);
    if (written < 0) throw Unavailable(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
    bytes += written;
    size -= static_cast<size_t>(written);
  }
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<Tensor> host;
  size_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (header.contains(name)) throw InvalidArgument(fmt::format("write_safetensors: two tensors named '{}'", name));
    host.push_back(tensor.to(Device::cpu()));
    header[name] = {{"dtype", safetensors_dtype(tensor.dtype())},
                    {"shape", tensor.shape().to_vector()},
                    {"data_offsets", {offset, offset + tensor.nbytes()}}};
    offset += tensor.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  const uint64_t length = text.size();

  const std::string temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw NotFound(fmt::format("{}: cannot create: {}", temporary, std::strerror(errno)));
  try {
    write_all(fd, &length, sizeof length, temporary);
    write_all(fd, text.data(), text.size(), temporary);
    for (const Tensor& tensor : host) write_all(fd, tensor.raw_data(), tensor.nbytes(), temporary);
    if (::fsync(fd) != 0) throw Unavailable(fmt::format("{}: fsync failed: {}", temporary, std::strerror(errno)));
  } catch (...) {
    ::close(fd);
    std::remove(temporary.c_str());
    throw;
  }
  ::close(fd);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw Unavailable(fmt::format("{}: cannot rename {} over it: {}", path, temporary, std::strerror(errno)));
  }
  const std::string folder = std::filesystem::path(path).parent_path().string();
  const int folder_fd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (folder_fd >= 0) {
    const int synced = ::fsync(folder_fd);
    ::close(folder_fd);
    if (synced != 0) throw Unavailable(fmt::format("{}: fsync of its folder failed: {}", path, std::strerror(errno)));
  }
}

namespace {

// clang-tidy flags the implicit special members of a struct holding nlohmann::json, whose moves are noexcept.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct Header {
  nlohmann::json json;
  uint64_t length = 0;  // bytes of JSON
  uint64_t file_size = 0;
};

Header read_header(std::ifstream& in, const std::string& path) {
  if (!in) throw NotFound(fmt::format("{}: cannot open", path));
  in.seekg(0, std::ios::end);
  Header header;
  header.file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (header.file_size < 8 || !in.read(reinterpret_cast<char*>(&header.length), 8) ||
      header.length > header.file_size - 8) {
    throw DataError(fmt::format("{}: not a safetensors file (header length {} in a file of {} bytes)", path,
                                header.length, header.file_size));
  }
  std::string text(header.length, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header.length));
  try {
    header.json = nlohmann::json::parse(text);
    if (!header.json.is_object()) throw DataError(fmt::format("{}: the safetensors header is not a JSON object", path));
  } catch (const nlohmann::json::exception& error) {
    throw DataError(fmt::format("{}: malformed safetensors header: {}", path, error.what()));
  }
  return header;
}

std::map<std::string, std::string> metadata_of(const nlohmann::json& header, const std::string& path) {
  std::map<std::string, std::string> metadata;
  if (!header.contains("__metadata__")) return metadata;
  try {
    for (const auto& [key, value] : header["__metadata__"].items()) metadata[key] = value.get<std::string>();
  } catch (const nlohmann::json::exception& error) {
    throw DataError(fmt::format("{}: malformed safetensors metadata: {}", path, error.what()));
  }
  return metadata;
}

}  // namespace

std::map<std::string, std::string> read_safetensors_metadata(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return metadata_of(read_header(in, path).json, path);
}

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const Header parsed = read_header(in, path);
  const nlohmann::json& header = parsed.json;
  const uint64_t length = parsed.length;
  const uint64_t data_size = parsed.file_size - 8 - length;
  SafetensorsFile file;
  file.metadata = metadata_of(header, path);
  std::vector<std::pair<uint64_t, std::string>> by_offset;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    try {
      const DType dtype = nimbus_dtype(entry.at("dtype").get<std::string>(), path, name);
      const std::vector<int64_t> dims = entry.at("shape").get<std::vector<int64_t>>();
      const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
      const Shape shape{std::span<const int64_t>(dims)};
      const uint64_t bytes = static_cast<uint64_t>(shape.numel()) * dtype_size(dtype);
      if (offsets.size() != 2 || offsets[1] < offsets[0] || offsets[1] > data_size ||
          offsets[1] - offsets[0] != bytes) {
        throw DataError(fmt::format("{}: tensor '{}' ({} {}) has data offsets outside the file or of the wrong size",
                                    path, name, dtype_name(dtype), shape.to_string()));
      }
      Tensor tensor = Tensor::empty(shape, dtype);
      in.seekg(static_cast<std::streamoff>(8 + length + offsets[0]));
      if (!in.read(static_cast<char*>(tensor.raw_data()), static_cast<std::streamsize>(bytes))) {
        throw DataError(fmt::format("{}: tensor '{}' is truncated", path, name));
      }
      file.tensors.emplace(name, tensor);
      by_offset.emplace_back(offsets[0], name);
    } catch (const nlohmann::json::exception& error) {
      throw DataError(fmt::format("{}: malformed entry for tensor '{}': {}", path, name, error.what()));
    }
  }
  std::sort(by_offset.begin(), by_offset.end());
  for (const auto& [offset, name] : by_offset) file.order.push_back(name);
  return file;
}

}  // namespace nimbus
