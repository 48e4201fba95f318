// Shapes: the dimensions of a dense row-major tensor, stored inline (no heap
// allocation), up to kMaxRank dimensions.
//
//   Shape s{32, 784};
//   s.rank();              // 2
//   s.numel();             // 25088
//   s[-1];                 // 784 (negative indices count from the end)
//   broadcast_shapes(Shape{32, 1, 10}, Shape{5, 10});  // [32, 5, 10], NumPy's rules
//   normalize_axis(-1, 3, "softmax");                   // 2; out of range throws and names the op
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace nimbus {

inline constexpr int kMaxRank = 8;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::span<const int64_t> dims);

  int rank() const { return rank_; }
  int64_t numel() const;
  bool is_scalar() const { return rank_ == 0; }

  // Negative i counts from the end. Out of range is an InvalidArgument.
  int64_t operator[](int i) const;
  int64_t& operator[](int i);
  int64_t dim(int i) const { return (*this)[i]; }

  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }
  std::span<const int64_t> dims() const { return {dims_.data(), static_cast<size_t>(rank_)}; }
  std::vector<int64_t> to_vector() const { return {begin(), end()}; }

  void push_back(int64_t dim);
  // Row-major strides in elements.
  std::array<int64_t, kMaxRank> strides() const;

  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }

  // "[32, 784]"
  std::string to_string() const;

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

// NumPy broadcasting: dimensions align from the right; each pair must be
// equal or one of them 1. `op` names the caller in the error message.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast");

// Maps axis in [-rank, rank) to [0, rank); otherwise throws InvalidArgument naming `op`.
int normalize_axis(int64_t axis, int rank, const char* op);

// Sorted, de-duplicated axes in [0, rank); empty `axes` means all axes.
std::vector<int> normalize_axes(std::span<const int64_t> axes, int rank, const char* op);

}  // namespace nimbus
