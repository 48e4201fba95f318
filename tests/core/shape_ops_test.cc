// Known values for the shape ops, worked out by hand: the reference kernels
// are the oracle of OpForward, so they are checked here against independent
// answers, as is segment_sum (a composite without op cases of its own).
#include "nimbus/ops/shape_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "nimbus/autodiff/gradient_tape.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/reduction.h"

namespace nimbus {
namespace {

Tensor f32(const std::vector<float>& values, const Shape& shape) { return Tensor::from_vector<float>(values, shape); }
Tensor i64(const std::vector<int64_t>& values) {
  return Tensor::from_vector<int64_t>(values, Shape{static_cast<int64_t>(values.size())});
}

TEST(ShapeOps, ConcatAndSplitAlongTheLastAxis) {
  const Tensor a = f32({1, 2, 3, 4}, {2, 2});
  const Tensor b = f32({5, 6}, {2, 1});
  const Tensor joined = concat({a, b}, -1);
  EXPECT_EQ(joined.shape(), (Shape{2, 3}));
  EXPECT_EQ(joined.to_vector<float>(), (std::vector<float>{1, 2, 5, 3, 4, 6}));
  const std::vector<Tensor> pieces = split(joined, {-1, 1}, 1);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].to_vector<float>(), a.to_vector<float>());
  EXPECT_EQ(pieces[1].to_vector<float>(), b.to_vector<float>());
}

TEST(ShapeOps, SliceAndPad) {
  const Tensor x = f32({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  EXPECT_EQ(slice(x, {1, 1}, {2, -1}).to_vector<float>(), (std::vector<float>{5, 6, 7, 9, 10, 11}));
  const Tensor padded = pad(f32({1, 2}, {1, 2}), {{1, 0}, {0, 2}}, 9);
  EXPECT_EQ(padded.shape(), (Shape{2, 4}));
  EXPECT_EQ(padded.to_vector<float>(), (std::vector<float>{9, 9, 9, 9, 1, 2, 9, 9}));
}

TEST(ShapeOps, GatherPicksRowsAndScatterAddAccumulatesDuplicates) {
  const Tensor table = f32({0, 1, 10, 11, 20, 21}, {3, 2});
  const Tensor rows = gather(table, i64({2, 0, 2}), 0);
  EXPECT_EQ(rows.to_vector<float>(), (std::vector<float>{20, 21, 0, 1, 20, 21}));
  const Tensor summed = scatter_add(f32({1, 2, 3, 4, 5, 6}, {3, 2}), i64({2, 0, 2}), {3, 2}, 0);
  EXPECT_EQ(summed.to_vector<float>(), (std::vector<float>{3, 4, 0, 0, 6, 8}));
}

TEST(ShapeOps, GatherGradientSumsOverRepeatedIndices) {
  const Tensor table = f32({0, 1, 10, 11, 20, 21}, {3, 2});
  GradientTape tape;
  tape.watch(table);
  const Tensor loss = sum(gather(table, i64({1, 1, 1, 0}), 0));
  const Tensor grad = tape.gradient(loss, {table})[0];
  EXPECT_EQ(grad.to_vector<float>(), (std::vector<float>{1, 1, 3, 3, 0, 0}));
}

TEST(ShapeOps, SegmentSumLeavesEmptySegmentsZero) {
  const Tensor data = f32({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
  const Tensor sums = segment_sum(data, i64({3, 0, 3, 0}), 5);
  EXPECT_EQ(sums.shape(), (Shape{5, 2}));
  EXPECT_EQ(sums.to_vector<float>(), (std::vector<float>{10, 12, 0, 0, 0, 0, 6, 8, 0, 0}));
}

TEST(ShapeOps, TrilAndTriuKeepTheirSideOfDiagonalK) {
  const Tensor x = f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  EXPECT_EQ(tril(x).to_vector<float>(), (std::vector<float>{1, 0, 0, 4, 5, 0, 7, 8, 9}));
  EXPECT_EQ(tril(x, -1).to_vector<float>(), (std::vector<float>{0, 0, 0, 4, 0, 0, 7, 8, 0}));
  EXPECT_EQ(triu(x, 1).to_vector<float>(), (std::vector<float>{0, 2, 3, 0, 0, 6, 0, 0, 0}));
  EXPECT_EQ(triu(x, -1).to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6, 0, 8, 9}));
}

TEST(ShapeOps, TopKSortsDescendingWithTiesInIndexOrder) {
  const Tensor x = f32({3, 1, 3, 5, 1, 0, 2, 2, 2, 9}, {2, 5});
  const auto [values, indices] = top_k(x, 3);
  EXPECT_EQ(values.to_vector<float>(), (std::vector<float>{5, 3, 3, 9, 2, 2}));
  EXPECT_EQ(indices.dtype(), DType::kI64);
  EXPECT_EQ(indices.to_vector<int64_t>(), (std::vector<int64_t>{3, 0, 2, 4, 1, 2}));
}

TEST(ShapeOps, TopKRanksNanFirst) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto [values, indices] = top_k(f32({1, nan, 4}, {3}), 2);
  EXPECT_TRUE(std::isnan(values.to_vector<float>()[0]));
  EXPECT_EQ(indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
}

TEST(ShapeOps, TopKGradientReachesOnlyTheChosenElements) {
  const Tensor x = f32({3, 1, 4, 1.5f, 5, 9}, {2, 3});
  GradientTape tape;
  tape.watch(x);
  const Tensor values = top_k(x, 2).first;
  const Tensor grad = tape.gradient(sum(values), {x})[0];
  EXPECT_EQ(grad.to_vector<float>(), (std::vector<float>{1, 0, 1, 0, 1, 1}));
}

}  // namespace
}  // namespace nimbus
