// Tensor: creation ops, host access and its errors, printing, views and
// shared storage, copies, dtype conversion, and undefined tensors.
#include "nimbus/tensor/tensor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/shape_ops.h"

namespace nimbus {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(TensorCreation, FullZerosOnes) {
  const Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.dtype(), DType::kF32);
  EXPECT_EQ(z.device(), Device::cpu());
  EXPECT_THAT(z.to_vector<float>(), ElementsAre(0, 0, 0, 0, 0, 0));
  EXPECT_THAT(ones({3}, DType::kI64).to_vector<int64_t>(), ElementsAre(1, 1, 1));
  EXPECT_THAT(full({2}, 2.5, DType::kF64).to_vector<double>(), ElementsAre(2.5, 2.5));
  EXPECT_THAT(full({2}, 1.0, DType::kBool).to_vector<bool>(), ElementsAre(true, true));
  EXPECT_EQ(full({}, 7.0).rank(), 0);
  EXPECT_EQ(zeros({4, 0}).numel(), 0);
}

TEST(TensorCreation, LikeVariantsCopyShapeDtypeAndDevice) {
  const Tensor x = zeros({3, 2}, DType::kBF16);
  for (const Tensor& t : {zeros_like(x), ones_like(x), full_like(x, 4.0)}) {
    EXPECT_EQ(t.shape(), x.shape());
    EXPECT_EQ(t.dtype(), DType::kBF16);
    EXPECT_FALSE(t.same_as(x));
  }
  EXPECT_EQ(full_like(x, 4.0).at<float>({2, 1}), 4.0f);
  const Tensor s = scalar_like(x, -1.5);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.dtype(), DType::kBF16);
  EXPECT_EQ(s.item<double>(), -1.5);
}

TEST(TensorCreation, ArangeLikeNumpy) {
  EXPECT_THAT(arange(0, 10, 2, DType::kI64).to_vector<int64_t>(), ElementsAre(0, 2, 4, 6, 8));
  EXPECT_THAT(arange(1, 2.5, 0.5).to_vector<float>(), ElementsAre(1.0f, 1.5f, 2.0f));
  EXPECT_THAT(arange(5, 0, -2, DType::kI32).to_vector<int32_t>(), ElementsAre(5, 3, 1));
  EXPECT_EQ(arange(3, 3).numel(), 0);
  EXPECT_EQ(arange(5, 0).numel(), 0) << "a positive step cannot go down";
  EXPECT_THROW(arange(0, 1, 0), InvalidArgument);
}

TEST(TensorCreation, FromVectorAndScalar) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(x.shape(), (Shape{2, 3}));
  EXPECT_EQ(x.nbytes(), 24u);
  EXPECT_EQ(x.at<float>({1, 2}), 6.0f);
  EXPECT_EQ(x.at<int>({0, 1}), 2) << "at converts to the requested type";
  EXPECT_EQ(x.at<float>({-1, -3}), 4.0f) << "negative indices count from the end";
  const Tensor s = Tensor::scalar<int64_t>(42);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.dtype(), DType::kI64);
  EXPECT_EQ(s.item<int64_t>(), 42);
  EXPECT_EQ(s.item<double>(), 42.0);
  EXPECT_EQ(Tensor::from_vector<float>({9}, {1, 1}).item<float>(), 9.0f) << "any single element";
}

TEST(TensorCreation, FromVectorCountMustMatchTheShape) {
  try {
    Tensor::from_vector<float>({1, 2, 3, 4, 5}, {2, 3});
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("5 values"), HasSubstr("[2, 3]"), HasSubstr("6 elements")));
  }
}

TEST(TensorAccess, ErrorsNameTheProblem) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  try {
    x.data<double>();
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("f32"), HasSubstr("f64")));
    EXPECT_THAT(e.hint(), HasSubstr(".to(dtype)"));
  }
  try {
    x.item<float>();
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("item()"), HasSubstr("[2, 3]"), HasSubstr("6 elements")));
  }
  EXPECT_THROW(zeros({0}).item<float>(), InvalidArgument);
  try {
    x.at<float>({1});
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("1 indices"), HasSubstr("[2, 3]")));
  }
  try {
    x.at<float>({0, 3});
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("index 3"), HasSubstr("axis 1"), HasSubstr("[2, 3]")));
  }
  EXPECT_THROW(x.at<float>({-3, 0}), InvalidArgument);
}

TEST(TensorPrinting, SmallTensorsInFull) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(x.to_string(), "Tensor(shape=[2, 3], dtype=f32, device=cpu:0) [[1, 2, 3], [4, 5, 6]]");
  std::ostringstream os;
  os << x;
  EXPECT_EQ(os.str(), x.to_string());
  EXPECT_EQ(Tensor::scalar<double>(-2.5).to_string(), "Tensor(shape=[], dtype=f64, device=cpu:0) -2.5");
  EXPECT_EQ(Tensor::from_vector<bool>({true, false}, {2}).to_string(),
            "Tensor(shape=[2], dtype=bool, device=cpu:0) [true, false]");
  EXPECT_EQ(Tensor::from_vector<int64_t>({-7, 12}, {2}).to_string(),
            "Tensor(shape=[2], dtype=i64, device=cpu:0) [-7, 12]");
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Tensor::from_vector<float>({std::nanf(""), inf, -inf, 0.125f}, {4}).to_string(),
            "Tensor(shape=[4], dtype=f32, device=cpu:0) [nan, inf, -inf, 0.125]");
  EXPECT_EQ(zeros({2, 0}).to_string(), "Tensor(shape=[2, 0], dtype=f32, device=cpu:0) [[], []]");
  EXPECT_EQ(Tensor().to_string(), "Tensor(undefined)");
}

TEST(TensorPrinting, LongDimensionsShowTheirEdges) {
  // Up to 7 elements print in full; longer dimensions show 3 at each end.
  EXPECT_EQ(arange(0, 7, 1, DType::kI64).to_string(),
            "Tensor(shape=[7], dtype=i64, device=cpu:0) [0, 1, 2, 3, 4, 5, 6]");
  EXPECT_EQ(arange(0, 10, 1, DType::kI64).to_string(),
            "Tensor(shape=[10], dtype=i64, device=cpu:0) [0, 1, 2, ..., 7, 8, 9]");
  const std::string matrix = arange(0, 20, 1, DType::kI32).reshape({10, 2}).to_string();
  EXPECT_EQ(matrix,
            "Tensor(shape=[10, 2], dtype=i32, device=cpu:0) [[0, 1], [2, 3], [4, 5], ..., [14, 15], [16, 17], "
            "[18, 19]]");
  const std::string wide = arange(0, 16, 1, DType::kI32).reshape({2, 8}).to_string();
  EXPECT_THAT(wide, HasSubstr("[[0, 1, 2, ..., 5, 6, 7], [8, 9, 10, ..., 13, 14, 15]]"));
}

TEST(TensorViews, ReshapeSharesStorage) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor v = x.reshape({3, 2});
  EXPECT_EQ(v.raw_data(), x.raw_data());
  EXPECT_FALSE(v.same_as(x));
  EXPECT_NE(v.id(), x.id());
  x.data<float>()[5] = 60;
  EXPECT_EQ(v.at<float>({2, 1}), 60.0f) << "a write through x shows through the view";
  v.copy_from(zeros({3, 2}));
  EXPECT_THAT(x.to_vector<float>(), ElementsAre(0, 0, 0, 0, 0, 0)) << "and the other way";
  EXPECT_EQ(reshape(x, std::vector<int64_t>{-1}).shape(), (Shape{6}));
}

TEST(TensorViews, ViewOfStorageAtAnOffset) {
  const Tensor base = arange(0, 8, 1, DType::kF32);
  const Tensor tail = Tensor::view(base.impl_ptr()->storage, 4 * sizeof(float), {2, 2}, DType::kF32);
  EXPECT_THAT(tail.to_vector<float>(), ElementsAre(4, 5, 6, 7));
  EXPECT_THROW(Tensor::view(base.impl_ptr()->storage, 8 * sizeof(float), {1}, DType::kF32), Error)
      << "a view past the end of its storage";
}

TEST(TensorCopies, CopyFromOverwritesInPlace) {
  Tensor x = zeros({2, 2});
  const Tensor alias = x;
  x.copy_from(Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}));
  EXPECT_THAT(alias.to_vector<float>(), ElementsAre(1, 2, 3, 4)) << "every handle sees the new values";
  try {
    x.copy_from(zeros({4}));
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("[4]"), HasSubstr("[2, 2]")));
  }
  try {
    x.copy_from(zeros({2, 2}, DType::kF64));
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("f64"), HasSubstr("f32")));
  }
}

TEST(TensorCopies, CloneIsIndependent) {
  const Tensor x = Tensor::from_vector<int32_t>({1, 2, 3}, {3});
  Tensor c = x.clone();
  EXPECT_NE(c.raw_data(), x.raw_data());
  EXPECT_NE(c.id(), x.id());
  EXPECT_EQ(c.dtype(), DType::kI32);
  c.data<int32_t>()[0] = 100;
  EXPECT_THAT(x.to_vector<int32_t>(), ElementsAre(1, 2, 3));
  EXPECT_THAT(c.to_vector<int32_t>(), ElementsAre(100, 2, 3));
}

TEST(TensorConversion, ToDtypeRoundTrips) {
  const Tensor x = Tensor::from_vector<float>({0.1f, -2.75f, 3e30f, -0.0f}, {4});
  EXPECT_EQ(x.to(DType::kF64).to(DType::kF32).to_vector<float>(), x.to_vector<float>()) << "f32 -> f64 is exact";
  EXPECT_TRUE(x.to(DType::kF32).same_as(x)) << "same dtype: the tensor itself";
  // f16 and bf16 round once, as their constructors do.
  const std::vector<float> source = x.to_vector<float>();
  const std::vector<float> via_half = x.to(DType::kF16).to_vector<float>();
  const std::vector<float> via_bf16 = x.to(DType::kBF16).to_vector<float>();
  for (size_t i = 0; i < source.size(); ++i) {
    EXPECT_EQ(via_half[i], float(Half(source[i]))) << i;
    EXPECT_EQ(via_bf16[i], float(BFloat16(source[i]))) << i;
  }
  EXPECT_TRUE(std::isinf(via_half[2])) << "3e30 overflows f16";
  EXPECT_TRUE(std::signbit(via_half[3])) << "-0 keeps its sign";

  const Tensor ints = Tensor::from_vector<int32_t>({-5, 0, 7}, {3});
  EXPECT_THAT(ints.to(DType::kF32).to(DType::kI32).to_vector<int32_t>(), ElementsAre(-5, 0, 7));
  EXPECT_THAT(ints.to(DType::kBool).to_vector<bool>(), ElementsAre(true, false, true));
  EXPECT_THAT(Tensor::from_vector<float>({-2.9f, 2.9f}, {2}).to(DType::kI64).to_vector<int64_t>(), ElementsAre(-2, 2))
      << "truncation toward zero";
  EXPECT_THAT(Tensor::from_vector<bool>({true, false}, {2}).to(DType::kF32).to(DType::kBool).to_vector<bool>(),
              ElementsAre(true, false));
}

TEST(TensorUndefined, EveryAccessIsAnError) {
  const Tensor t;
  EXPECT_FALSE(t.defined());
  try {
    (void)t.shape();
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.message(), HasSubstr("undefined tensor"));
  }
  EXPECT_THROW((void)t.numel(), InvalidArgument);
  EXPECT_THROW((void)t.dtype(), InvalidArgument);
  EXPECT_THROW(t.to_vector<float>(), InvalidArgument);
  EXPECT_THROW(t.clone(), InvalidArgument);
  EXPECT_THROW(Tensor(zeros({1})).copy_from(t), InvalidArgument);
  try {
    add(zeros({2}), t);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.message(), AllOf(StartsWith("add"), HasSubstr("input 1"), HasSubstr("undefined")));
  }
}

TEST(TensorIdentity, IdsAreUniqueAndCopiesShareThem) {
  const Tensor a = zeros({1});
  const Tensor b = zeros({1});
  const Tensor a_copy = a;
  EXPECT_NE(a.id(), b.id());
  EXPECT_EQ(a_copy.id(), a.id());
  EXPECT_TRUE(a_copy.same_as(a));
}

}  // namespace
}  // namespace nimbus
