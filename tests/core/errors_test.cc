// Bad input to ops is a nimbus::Error of the right kind whose message names
// the op and the offending shapes, dtypes or axes, never a crash. (Malformed
// IDX files are covered in tests/data/idx_test.cc.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>

#include "nimbus/autodiff/gradient_tape.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/registry.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Matcher;
using ::testing::StartsWith;

// Runs `call`, which must throw a nimbus::Error of `kind` whose message matches.
void expect_error(const std::function<void()>& call, ErrorKind kind, const Matcher<std::string>& message) {
  try {
    call();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << error_kind_name(e.kind()) << ": " << e.what();
    EXPECT_THAT(e.message(), message);
  }
}

// Like EXPECT_THROW, for a nimbus::Error of `kind` whose message matches.
#define EXPECT_NIMBUS_ERROR(statement, kind, message) expect_error([&] { statement; }, kind, message)

Tensor f32(const Shape& shape) { return zeros(shape, DType::kF32); }

TEST(OpErrors, MatmulShapeMismatchNamesBothShapes) {
  EXPECT_NIMBUS_ERROR(
      matmul(f32({2, 3}), f32({4, 5})), ErrorKind::kInvalidArgument,
      AllOf(StartsWith("matmul"), HasSubstr("[2, 3]"), HasSubstr("[4, 5]"), HasSubstr("K=3"), HasSubstr("K=4")));
  EXPECT_NIMBUS_ERROR(matmul(f32({2, 3}), f32({3, 2}), false, true), ErrorKind::kInvalidArgument,
                      AllOf(HasSubstr("[3, 2] (transposed)"), HasSubstr("K=2")));
  EXPECT_NIMBUS_ERROR(matmul(f32({3}), f32({3, 2})), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("matmul"), HasSubstr("[3]"), HasSubstr("rank 2")));
}

TEST(OpErrors, MatmulBatchMismatchNamesBothOperands) {
  EXPECT_NIMBUS_ERROR(matmul(f32({2, 3, 4}), f32({5, 4, 2})), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("matmul"), HasSubstr("[2, 3, 4]"), HasSubstr("[5, 4, 2]"), HasSubstr("batch")));
}

TEST(OpErrors, BroadcastMismatchNamesBothShapesAndTheOp) {
  EXPECT_NIMBUS_ERROR(add(f32({4, 3}), f32({2, 3})), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("add"), HasSubstr("[4, 3]"), HasSubstr("[2, 3]")));
  EXPECT_NIMBUS_ERROR(mul(f32({2, 5}), f32({4})), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("mul"), HasSubstr("[2, 5]"), HasSubstr("[4]")));
  EXPECT_NIMBUS_ERROR(less(f32({3}), f32({2})), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("less"), HasSubstr("[3]")));
  EXPECT_NIMBUS_ERROR(broadcast_to(f32({3, 2}), {3, 4}), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("broadcast_to"), HasSubstr("[3, 2]"), HasSubstr("[3, 4]")));
  EXPECT_NIMBUS_ERROR(where(zeros({3}, DType::kBool), f32({3}), f32({4})), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("where"), HasSubstr("[3]"), HasSubstr("[4]")));
}

TEST(OpErrors, MixedDtypesAreRefusedWithAHintToCast) {
  try {
    add(f32({2}), zeros({2}, DType::kF64));
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.message(), AllOf(StartsWith("add"), HasSubstr("f32"), HasSubstr("f64")));
    EXPECT_THAT(e.hint(), HasSubstr("to(dtype)"));
  }
  EXPECT_NIMBUS_ERROR(matmul(f32({2, 2}), zeros({2, 2}, DType::kF64)), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("matmul"), HasSubstr("f32"), HasSubstr("f64")));
  EXPECT_NIMBUS_ERROR(where(zeros({2}, DType::kBool), f32({2}), zeros({2}, DType::kI32)), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("where"), HasSubstr("f32"), HasSubstr("i32")));
}

TEST(OpErrors, WrongDtypeForTheOpNamesTheSupportedOnes) {
  EXPECT_NIMBUS_ERROR(log(zeros({2}, DType::kI32)), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("log"), HasSubstr("i32"), HasSubstr("f32")));
  EXPECT_NIMBUS_ERROR(div(zeros({2}, DType::kI64), zeros({2}, DType::kI64)), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("div"), HasSubstr("i64")));
  EXPECT_NIMBUS_ERROR(matmul(zeros({2, 2}, DType::kI32), zeros({2, 2}, DType::kI32)), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("matmul"), HasSubstr("i32")));
  EXPECT_NIMBUS_ERROR(mean(zeros({2}, DType::kI64)), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("mean"), HasSubstr("i64")));
  EXPECT_NIMBUS_ERROR(add(zeros({2}, DType::kBool), zeros({2}, DType::kBool)), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("add"), HasSubstr("bool")));
  EXPECT_NIMBUS_ERROR(logical_not(f32({2})), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("logical_not"), HasSubstr("f32"), HasSubstr("bool")));
  EXPECT_NIMBUS_ERROR(where(f32({2}), f32({2}), f32({2})), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("where"), HasSubstr("bool")));
  EXPECT_NIMBUS_ERROR(one_hot(f32({2}), 3), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("one_hot"), HasSubstr("f32")));
  EXPECT_NIMBUS_ERROR(sparse_softmax_cross_entropy(f32({2, 3}), f32({2})), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("sparse_softmax_cross_entropy"), HasSubstr("f32")));
}

TEST(OpErrors, OutOfRangeAxesNameTheOpAndTheAxis) {
  EXPECT_NIMBUS_ERROR(sum(f32({2, 3}), {2}), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("sum"), HasSubstr("axis 2"), HasSubstr("rank 2")));
  EXPECT_NIMBUS_ERROR(mean(f32({2, 3}), {-3}), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("mean"), HasSubstr("axis -3")));
  EXPECT_NIMBUS_ERROR(softmax(f32({2, 3}), 2), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("softmax"), HasSubstr("axis 2")));
  EXPECT_NIMBUS_ERROR(log_softmax(f32({4}), -2), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("log_softmax"), HasSubstr("axis -2")));
  EXPECT_NIMBUS_ERROR(softmax(f32({})), ErrorKind::kInvalidArgument, AllOf(StartsWith("softmax"), HasSubstr("scalar")));
  EXPECT_NIMBUS_ERROR(argmax(f32({2, 3}), 5), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("argmax"), HasSubstr("axis 5")));
  EXPECT_NIMBUS_ERROR(transpose(f32({3, 4}), {0, 2}), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("transpose"), HasSubstr("[0, 2]"), HasSubstr("[3, 4]")));
  EXPECT_NIMBUS_ERROR(transpose(f32({3, 4}), {0, 0}), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("transpose"), HasSubstr("[0, 0]")));
  EXPECT_NIMBUS_ERROR(transpose(f32({3, 4, 5}), {1, 0}), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("transpose"), HasSubstr("[3, 4, 5]")));
  EXPECT_NIMBUS_ERROR(transpose(f32({3, 4}), {-3, 0}), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("transpose"), HasSubstr("[-3, 0]"), HasSubstr("[3, 4]")));
  EXPECT_NIMBUS_ERROR(expand_dims(f32({2}), 3), ErrorKind::kInvalidArgument, StartsWith("expand_dims"));
  EXPECT_NIMBUS_ERROR(squeeze(f32({2, 1}), {0}), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("squeeze"), HasSubstr("[2, 1]")));
}

TEST(OpErrors, ShapeRulesOfOtherOps) {
  EXPECT_NIMBUS_ERROR(reshape(f32({2, 3}), Shape{4, 2}), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("reshape"), HasSubstr("[2, 3]"), HasSubstr("[4, 2]")));
  EXPECT_NIMBUS_ERROR(reshape(f32({2, 3}), std::vector<int64_t>{-1, 4}), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("reshape"), HasSubstr("[2, 3]"), HasSubstr("-1, 4")));
  EXPECT_NIMBUS_ERROR(reshape(f32({2, 3}), std::vector<int64_t>{-1, -1}), ErrorKind::kInvalidArgument,
                      HasSubstr("more than one -1"));
  EXPECT_NIMBUS_ERROR(reduce_max(f32({0, 3})), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("reduce_max"), HasSubstr("empty"), HasSubstr("[0, 3]")));
  EXPECT_NIMBUS_ERROR(sparse_softmax_cross_entropy(f32({4, 3}), zeros({3}, DType::kI64)), ErrorKind::kInvalidArgument,
                      AllOf(HasSubstr("[3]"), HasSubstr("[4, 3]"), HasSubstr("[4]")));
  EXPECT_NIMBUS_ERROR(softmax_cross_entropy(f32({4, 3}), f32({4, 2})), ErrorKind::kInvalidArgument,
                      AllOf(HasSubstr("[4, 2]"), HasSubstr("[4, 3]")));
  EXPECT_NIMBUS_ERROR(clip(f32({2}), 1.0, -1.0), ErrorKind::kInvalidArgument, StartsWith("clip"));
  EXPECT_NIMBUS_ERROR(gelu(f32({2}), "fast"), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("gelu"), HasSubstr("fast")));
  EXPECT_NIMBUS_ERROR(one_hot(zeros({2}, DType::kI64), -1), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("one_hot"), HasSubstr("-1")));
}

TEST(OpErrors, ArangeNeedsFiniteBoundsAndACountThatFits) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NIMBUS_ERROR(arange(0, inf), ErrorKind::kInvalidArgument, AllOf(HasSubstr("arange"), HasSubstr("inf")));
  EXPECT_NIMBUS_ERROR(arange(nan, 1), ErrorKind::kInvalidArgument, AllOf(HasSubstr("arange"), HasSubstr("nan")));
  EXPECT_NIMBUS_ERROR(arange(0, 1, nan), ErrorKind::kInvalidArgument, HasSubstr("arange"));
  EXPECT_NIMBUS_ERROR(arange(0, 1e30, 1e-30), ErrorKind::kInvalidArgument,
                      AllOf(HasSubstr("arange"), HasSubstr("elements")));
}

TEST(OpErrors, LabelsOutsideTheClassesAreReportedWithTheExample) {
  const Tensor labels = Tensor::from_vector<int64_t>({0, 5}, {2});
  EXPECT_NIMBUS_ERROR(sparse_softmax_cross_entropy(f32({2, 3}), labels), ErrorKind::kInvalidArgument,
                      AllOf(HasSubstr("label 5"), HasSubstr("example 1"), HasSubstr("3 classes")));
  const Tensor negative = Tensor::from_vector<int32_t>({-1, 0}, {2});
  EXPECT_NIMBUS_ERROR(sparse_softmax_cross_entropy(f32({2, 3}), negative), ErrorKind::kInvalidArgument,
                      HasSubstr("label -1"));
}

TEST(OpErrors, CallingOpsWrongly) {
  const OpSchema& add_op = OpRegistry::global().get("add");
  EXPECT_NIMBUS_ERROR(call_op(add_op, {f32({2})}), ErrorKind::kInvalidArgument,
                      AllOf(StartsWith("add"), HasSubstr("1 inputs"), HasSubstr("2 expected")));
  EXPECT_NIMBUS_ERROR(OpRegistry::global().get("conv9d"), ErrorKind::kNotFound, HasSubstr("conv9d"));
}

TEST(OpErrors, FailedOpLeavesTheTapeUsable) {
  const Tensor x = Tensor::from_vector<double>({1, 2}, {2});
  GradientTape tape;
  tape.watch(x);
  EXPECT_THROW(add(x, zeros({3}, DType::kF64)), InvalidArgument);
  const Tensor loss = sum(x * x);
  EXPECT_EQ(tape.gradient(loss, {x})[0].to_vector<double>(), (std::vector<double>{2, 4}));
}

}  // namespace
}  // namespace nimbus
