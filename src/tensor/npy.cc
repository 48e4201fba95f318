#include "nimbus/tensor/npy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <cstring>
#include <fstream>

#include "nimbus/base/error.h"

namespace nimbus {

namespace {

const char* numpy_descr(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "<f4";
    case DType::kF64: return "<f8";
    case DType::kF16: return "<f2";
    case DType::kI32: return "<i4";
    case DType::kI64: return "<i8";
    case DType::kU8: return "|u1";
    case DType::kBool: return "|b1";
    default: return nullptr;
  }
}

}  // namespace

void write_npy(const std::string& path, const Tensor& tensor) {
  const Tensor host = (tensor.dtype() == DType::kBF16 ? tensor.to(DType::kF32) : tensor).to(Device::cpu());
  const char* descr = numpy_descr(host.dtype());
  NIMBUS_ASSERT(descr != nullptr) << "no NumPy type for " << dtype_name(host.dtype());
  std::string shape = fmt::format("{}", fmt::join(host.shape().to_vector(), ", "));
  if (host.rank() == 1) shape += ",";  // Python's one-element tuple: (3,)
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, shape);
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const auto length = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char*>(&length), 2);
  out << header;
  out.write(static_cast<const char*>(host.raw_data()), static_cast<std::streamsize>(host.nbytes()));
  out.close();
  if (!out) throw Unavailable(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
}

}  // namespace nimbus
