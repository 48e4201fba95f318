// The one row slicer of train/: rows [begin, end) of a tensor's first (batch) axis, by the slice
// op, so it serves eager code and traced steps alike, on any device. Internal to the library.
#pragma once

#include <cstdint>

#include "nimbus/tensor/tensor.h"

namespace nimbus::train {

// Rows [begin, end) of x (rank >= 1).
Tensor rows(const Tensor& x, int64_t begin, int64_t end);

}  // namespace nimbus::train
