// IDX files: the format of MNIST and Fashion-MNIST (Y. LeCun,
// http://yann.lecun.com/exdb/mnist/), plain or gzip-compressed.
//
//   Tensor images = read_idx("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");  // u8 (60000, 28, 28)
//   Tensor labels = read_idx(".../train-labels-idx1-ubyte.gz");                               // u8 (60000)
//   read_idx_header(...).shape;  // (60000, 28, 28), from the header alone
//   write_idx("out.idx", images);  // plain (uncompressed) IDX
//
// Layout: two zero bytes, a type code (0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32,
// 0x0D f32, 0x0E f64), the number of dimensions, each dimension as a
// big-endian u32, then the elements big-endian in row-major order. i8 and i16
// elements are widened to i32. A missing file is NotFound; a malformed or
// truncated one is a DataError naming the file and the byte offset.
#pragma once

#include <string>

#include "nimbus/tensor/tensor.h"

namespace nimbus::data {

// The file's array, in host pipeline memory (host_tensor).
Tensor read_idx(const std::string& path);
// The file's shape and element type (as read_idx returns them), from its header alone: what a dry run
// (nimbus train --dry-run) may read of a data file.
struct IdxHeader {
  Shape shape;
  DType dtype;
};
IdxHeader read_idx_header(const std::string& path);
void write_idx(const std::string& path, const Tensor& tensor);

// Where Debian's dataset-fashion-mnist package puts the files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

}  // namespace nimbus::data
