#include "nimbus/base/shape.h"

#include <fmt/format.h>

#include <algorithm>

#include "nimbus/base/error.h"

namespace nimbus {

namespace {
void check_rank(size_t rank) {
  if (rank > static_cast<size_t>(kMaxRank)) {
    throw InvalidArgument(fmt::format("shape of rank {} exceeds the maximum rank {}", rank, kMaxRank),
                          "reshape the tensor to fewer dimensions");
  }
}
void check_dim(int64_t dim) {
  if (dim < 0) throw InvalidArgument(fmt::format("shape dimension {} is negative", dim));
}
}  // namespace

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::span<const int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const int64_t> dims) {
  check_rank(dims.size());
  for (int64_t d : dims) check_dim(d);
  std::copy(dims.begin(), dims.end(), dims_.begin());
  rank_ = static_cast<int>(dims.size());
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

int64_t Shape::operator[](int i) const { return dims_[normalize_axis(i, rank_, "shape index")]; }
int64_t& Shape::operator[](int i) { return dims_[normalize_axis(i, rank_, "shape index")]; }

void Shape::push_back(int64_t dim) {
  check_rank(static_cast<size_t>(rank_) + 1);
  check_dim(dim);
  dims_[rank_++] = dim;
}

std::array<int64_t, kMaxRank> Shape::strides() const {
  std::array<int64_t, kMaxRank> strides{};
  int64_t stride = 1;
  for (int i = rank_ - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= dims_[i];
  }
  return strides;
}

bool Shape::operator==(const Shape& other) const {
  return rank_ == other.rank_ && std::equal(begin(), end(), other.begin());
}

std::string Shape::to_string() const { return fmt::format("[{}]", fmt::join(begin(), end(), ", ")); }

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const int rank = std::max(a.rank(), b.rank());
  Shape result;
  for (int i = 0; i < rank; ++i) {
    const int ia = a.rank() - rank + i;
    const int ib = b.rank() - rank + i;
    const int64_t da = ia >= 0 ? a.dims()[ia] : 1;
    const int64_t db = ib >= 0 ? b.dims()[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      throw InvalidArgument(
          fmt::format("{}: shapes {} and {} cannot be broadcast (dimension {} from the right: {} vs {})", op,
                      a.to_string(), b.to_string(), rank - i, da, db),
          "broadcasting needs each pair of dimensions, aligned from the right, to be equal or 1");
    }
    result.push_back(da == 1 ? db : da);
  }
  return result;
}

int normalize_axis(int64_t axis, int rank, const char* op) {
  if (axis < -rank || axis >= rank) {
    throw InvalidArgument(fmt::format("{}: axis {} is out of range for a tensor of rank {} (valid: {} to {})", op, axis,
                                      rank, -rank, rank - 1));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

std::vector<int> normalize_axes(std::span<const int64_t> axes, int rank, const char* op) {
  std::vector<int> result;
  if (axes.empty()) {
    for (int i = 0; i < rank; ++i) result.push_back(i);
    return result;
  }
  for (int64_t axis : axes) result.push_back(normalize_axis(axis, rank, op));
  std::sort(result.begin(), result.end());
  result.erase(std::unique(result.begin(), result.end()), result.end());
  return result;
}

}  // namespace nimbus
