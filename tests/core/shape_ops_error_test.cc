// Shape-op errors name what is wrong: the op, the shapes, the axis, the index.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "nimbus/ops/creation.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus {
namespace {

// The message of the InvalidArgument that `call` throws, or a test failure.
std::string invalid_argument_message(const std::function<void()>& call) {
  try {
    call();
  } catch (const InvalidArgument& error) {
    return error.what();
  }
  ADD_FAILURE() << "no InvalidArgument thrown";
  return {};
}

void expect_mentions(const std::string& message, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "\"" << part << "\" missing from: " << message;
  }
}

Tensor ids(std::vector<int64_t> values) {
  const Shape shape{static_cast<int64_t>(values.size())};
  return Tensor::from_vector<int64_t>(values, shape);
}

TEST(ShapeOpErrors, ConcatNamesTheMismatchingInputAndItsShape) {
  const std::string message = invalid_argument_message([] {
    concat({zeros({2, 3}), zeros({2, 3}), zeros({4, 2})}, 0);
  });
  expect_mentions(message, {"concat", "input 2", "[4, 2]", "[2, 3]", "axis 0"});
}

TEST(ShapeOpErrors, ConcatNamesTheDtypeMismatch) {
  const std::string message = invalid_argument_message([] { concat({zeros({2}), zeros({2}, DType::kF64)}, 0); });
  expect_mentions(message, {"concat", "input 1", "f64", "f32"});
}

TEST(ShapeOpErrors, SplitSizesNotSummingNameTheSizesAndTheAxisLength) {
  const std::string message = invalid_argument_message([] { split(zeros({3, 7}), {2, 3}, 1); });
  expect_mentions(message, {"split", "[2, 3]", "sum to 5", "axis 1", "[3, 7]", "length 7", "-1"});
}

TEST(ShapeOpErrors, SplitRejectsTwoUnknownSizes) {
  expect_mentions(invalid_argument_message([] { split(zeros({6}), {-1, -1}, 0); }), {"split", "more than one -1"});
}

TEST(ShapeOpErrors, SliceOutOfBoundsNamesTheRangeAxisAndShape) {
  const std::string message = invalid_argument_message([] { slice(zeros({4, 5}), {1, 3}, {2, 4}); });
  expect_mentions(message, {"slice", "[3, 7)", "axis 1", "[4, 5]", "length 5"});
}

TEST(ShapeOpErrors, SliceRejectsNegativeBegin) {
  const std::string message = invalid_argument_message([] { slice(zeros({4, 5}), {0, -2}, {1, 1}); });
  expect_mentions(message, {"slice", "begin[1] = -2", "negative", "[4, 5]"});
}

TEST(ShapeOpErrors, GatherIndexOutOfRangeNamesValuePositionAndRange) {
  const Tensor indices = Tensor::from_vector<int64_t>({0, 2, 1, 5}, {2, 2});
  const std::string message = invalid_argument_message([&] { gather(zeros({5, 3}), indices, 1); });
  expect_mentions(message, {"gather", "indices[1, 1] = 5", "[0, 3)", "axis 1", "[5, 3]"});
}

TEST(ShapeOpErrors, GatherRejectsNegativeIndex) {
  const std::string message = invalid_argument_message([] { gather(zeros({4}), ids({-1}), 0); });
  expect_mentions(message, {"gather", "indices[0] = -1", "[0, 4)"});
}

TEST(ShapeOpErrors, ScatterAddNamesTheUpdatesShapeItNeeds) {
  const std::string message = invalid_argument_message([] { scatter_add(zeros({3, 2}), ids({0, 1}), {4, 2}); });
  expect_mentions(message, {"scatter_add", "[3, 2]", "[2, 2]", "[4, 2]"});
}

TEST(ShapeOpErrors, SegmentSumNeedsOneIdPerRow) {
  const std::string message = invalid_argument_message([] { segment_sum(zeros({4, 2}), ids({0, 1, 1}), 2); });
  expect_mentions(message, {"segment_sum", "[3]", "[4, 2]", "[4]"});
}

TEST(ShapeOpErrors, TrilOnRank1NamesTheShape) {
  const std::string message = invalid_argument_message([] { tril(zeros({5})); });
  expect_mentions(message, {"tril", "[5]", "rank 1", "rank 2 or more"});
}

TEST(ShapeOpErrors, TopKLargerThanTheAxisNamesKAndTheShape) {
  const std::string message = invalid_argument_message([] { top_k(zeros({2, 3}), 4); });
  expect_mentions(message, {"top_k", "k = 4", "[2, 3]", "length 3", "at most 3"});
}

TEST(ShapeOpErrors, PadRejectsNegativePaddings) {
  const std::string message = invalid_argument_message([] { pad(zeros({2, 2}), {{0, 0}, {-1, 1}}); });
  expect_mentions(message, {"pad", "(-1, 1)", "axis 1", "slice"});
}

}  // namespace
}  // namespace nimbus
