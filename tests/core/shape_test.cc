// Shape: construction limits, indexing, strides, printing, NumPy broadcasting
// and axis normalization, with the errors each one raises.
#include "nimbus/base/shape.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "nimbus/base/error.h"

namespace nimbus {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(Shape, DimensionsRankAndElementCount) {
  const Shape s{32, 784};
  EXPECT_EQ(s.rank(), 2);
  EXPECT_EQ(s.numel(), 32 * 784);
  EXPECT_EQ(s[0], 32);
  EXPECT_EQ(s[-1], 784);
  EXPECT_EQ(s[-2], 32);
  EXPECT_EQ(s.dim(1), 784);
  EXPECT_EQ(s.to_vector(), (std::vector<int64_t>{32, 784}));
  EXPECT_FALSE(s.is_scalar());

  const Shape scalar;
  EXPECT_TRUE(scalar.is_scalar());
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.numel(), 1) << "a scalar holds one element";
  EXPECT_EQ((Shape{3, 0, 5}.numel()), 0);
}

TEST(Shape, FromSpanAndPushBack) {
  const std::vector<int64_t> dims{2, 3, 4};
  Shape s{std::span<const int64_t>(dims)};
  EXPECT_EQ(s, (Shape{2, 3, 4}));
  s.push_back(5);
  EXPECT_EQ(s, (Shape{2, 3, 4, 5}));
  s[1] = 7;
  EXPECT_EQ(s, (Shape{2, 7, 4, 5}));
}

TEST(Shape, IndexOutOfRangeIsAnError) {
  const Shape s{2, 3};
  try {
    (void)s[2];
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("axis 2"), HasSubstr("rank 2")));
  }
  EXPECT_THROW((void)s[-3], InvalidArgument);
  EXPECT_THROW((void)Shape()[0], InvalidArgument);
}

TEST(Shape, RankAboveEightAndNegativeDimensionsAreRefused) {
  EXPECT_NO_THROW((Shape{1, 1, 1, 1, 1, 1, 1, 1}));
  try {
    Shape s{1, 1, 1, 1, 1, 1, 1, 1, 1};
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("rank 9"), HasSubstr("maximum rank 8")));
  }
  Shape full{1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_THROW(full.push_back(1), InvalidArgument);
  EXPECT_THROW((Shape{2, -1}), InvalidArgument);
  Shape s{2};
  EXPECT_THROW(s.push_back(-3), InvalidArgument);
}

TEST(Shape, RowMajorStrides) {
  const auto strides = Shape{2, 3, 4}.strides();
  EXPECT_EQ(strides[0], 12);
  EXPECT_EQ(strides[1], 4);
  EXPECT_EQ(strides[2], 1);
}

TEST(Shape, EqualityAndPrinting) {
  EXPECT_EQ((Shape{2, 3}), (Shape{2, 3}));
  EXPECT_NE((Shape{2, 3}), (Shape{3, 2}));
  EXPECT_NE((Shape{2, 3}), (Shape{2, 3, 1}));
  EXPECT_NE(Shape{}, (Shape{1}));
  EXPECT_EQ((Shape{32, 784}.to_string()), "[32, 784]");
  EXPECT_EQ(Shape{}.to_string(), "[]");
}

TEST(Shape, BroadcastingFollowsNumPy) {
  EXPECT_EQ(broadcast_shapes(Shape{32, 1, 10}, Shape{5, 10}), (Shape{32, 5, 10}));
  EXPECT_EQ(broadcast_shapes(Shape{5, 10}, Shape{32, 1, 10}), (Shape{32, 5, 10}));
  EXPECT_EQ(broadcast_shapes(Shape{}, Shape{3, 4}), (Shape{3, 4}));
  EXPECT_EQ(broadcast_shapes(Shape{3, 1}, Shape{1, 4}), (Shape{3, 4}));
  EXPECT_EQ(broadcast_shapes(Shape{0, 1}, Shape{1, 4}), (Shape{0, 4}));
  EXPECT_EQ(broadcast_shapes(Shape{2, 3}, Shape{2, 3}), (Shape{2, 3}));
}

TEST(Shape, IncompatibleBroadcastNamesBothShapesAndTheOp) {
  try {
    broadcast_shapes(Shape{4, 3}, Shape{2, 3}, "add");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_THAT(e.message(), AllOf(HasSubstr("add"), HasSubstr("[4, 3]"), HasSubstr("[2, 3]"), HasSubstr("4 vs 2")));
    EXPECT_FALSE(e.hint().empty());
  }
}

TEST(Shape, NormalizeAxis) {
  EXPECT_EQ(normalize_axis(-1, 3, "softmax"), 2);
  EXPECT_EQ(normalize_axis(-3, 3, "softmax"), 0);
  EXPECT_EQ(normalize_axis(2, 3, "softmax"), 2);
  try {
    normalize_axis(3, 3, "softmax");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("softmax"), HasSubstr("axis 3"), HasSubstr("-3 to 2")));
  }
  EXPECT_THROW(normalize_axis(-4, 3, "sum"), InvalidArgument);
  EXPECT_THROW(normalize_axis(0, 0, "sum"), InvalidArgument) << "a scalar has no axes";
}

TEST(Shape, NormalizeAxesSortsAndDeduplicates) {
  const std::vector<int64_t> axes{-1, 0, 2, 0};
  EXPECT_EQ(normalize_axes(axes, 3, "sum"), (std::vector<int>{0, 2}));
  EXPECT_EQ(normalize_axes({}, 3, "sum"), (std::vector<int>{0, 1, 2})) << "no axes means every axis";
  EXPECT_TRUE(normalize_axes({}, 0, "sum").empty());
  const std::vector<int64_t> bad{0, 5};
  EXPECT_THROW(normalize_axes(bad, 3, "sum"), InvalidArgument);
}

}  // namespace
}  // namespace nimbus
