#include "rows.h"

#include <vector>

#include "nimbus/ops/shape_ops.h"

namespace nimbus::train {

Tensor rows(const Tensor& x, int64_t begin, int64_t end) {
  std::vector<int64_t> start(static_cast<size_t>(x.rank()), 0), size(static_cast<size_t>(x.rank()), -1);
  start[0] = begin;
  size[0] = end - begin;
  return slice(x, start, size);
}

}  // namespace nimbus::train
