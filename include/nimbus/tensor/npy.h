// NumPy's .npy files (format version 1.0), so numpy.load reads what Nimbus writes.
//
//   write_npy("predictions.npy", logits);   // numpy.load("predictions.npy").shape == (10000, 10)
//
// Layout: the magic "\x93NUMPY", version bytes 1 0, a little-endian u16 header length, then the
// header, a Python dict literal ({'descr': '<f4', 'fortran_order': False, 'shape': (10000, 10), })
// padded with spaces and ended by '\n' so the data starts at a multiple of 64 bytes; then the
// elements, little-endian, row-major.
#pragma once

#include <string>

#include "nimbus/tensor/tensor.h"

namespace nimbus {

// bf16 (which NumPy lacks) is written as f32. Unavailable when the file cannot be written.
void write_npy(const std::string& path, const Tensor& tensor);

}  // namespace nimbus
