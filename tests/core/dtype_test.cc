// DType: sizes, names, parsing with aliases, classification, and the mapping
// between dtypes and their C++ storage types.
#include "nimbus/base/dtype.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

namespace nimbus {
namespace {

using ::testing::HasSubstr;

TEST(DType, NamesAreUniqueAndParseBack) {
  std::set<std::string_view> names;
  for (DType dtype : kAllDTypes) {
    const std::string_view name = dtype_name(dtype);
    EXPECT_TRUE(names.insert(name).second) << name;
    EXPECT_EQ(parse_dtype(name), dtype) << name;
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kNumDTypes));
  EXPECT_EQ(dtype_name(DType::kBF16), "bf16");
  EXPECT_EQ(dtype_name(DType::kBool), "bool");
}

TEST(DType, ParsesCommonAliases) {
  EXPECT_EQ(parse_dtype("float32"), DType::kF32);
  EXPECT_EQ(parse_dtype("float"), DType::kF32);
  EXPECT_EQ(parse_dtype("float64"), DType::kF64);
  EXPECT_EQ(parse_dtype("double"), DType::kF64);
  EXPECT_EQ(parse_dtype("float16"), DType::kF16);
  EXPECT_EQ(parse_dtype("half"), DType::kF16);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("int32"), DType::kI32);
  EXPECT_EQ(parse_dtype("int64"), DType::kI64);
  EXPECT_EQ(parse_dtype("uint8"), DType::kU8);
}

TEST(DType, UnknownNameIsAnInvalidArgumentListingTheValidNames) {
  for (const char* bad : {"f8", "", "float128", "f32 ", "int"}) {
    try {
      parse_dtype(bad);
      FAIL() << "'" << bad << "' parsed";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_THAT(e.message(), HasSubstr(std::string("'") + bad + "'"));
      EXPECT_THAT(e.hint(), HasSubstr("bf16"));
    }
  }
}

TEST(DType, SizesMatchStorageTypes) {
  for (DType dtype : kAllDTypes) {
    const size_t storage = visit_dtype(dtype, []<typename T>() { return sizeof(T); });
    EXPECT_EQ(dtype_size(dtype), storage) << dtype_name(dtype);
    const DType back = visit_dtype(dtype, []<typename T>() { return dtype_of<T>(); });
    EXPECT_EQ(back, dtype) << dtype_name(dtype);
  }
  EXPECT_EQ(dtype_size(DType::kF16), 2u);
  EXPECT_EQ(dtype_size(DType::kI64), 8u);
}

TEST(DType, Classification) {
  for (DType dtype : kAllDTypes) {
    const bool floating = dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kF16 || dtype == DType::kBF16;
    const bool integral = dtype == DType::kI32 || dtype == DType::kI64 || dtype == DType::kU8;
    EXPECT_EQ(is_floating(dtype), floating) << dtype_name(dtype);
    EXPECT_EQ(is_integral(dtype), integral) << dtype_name(dtype);
  }
  EXPECT_FALSE(is_integral(DType::kBool)) << "bool is neither";
}

TEST(DType, ConversionsThroughDouble) {
  EXPECT_EQ(from_double<int32_t>(-2.9), -2) << "truncates toward zero";
  EXPECT_EQ(from_double<bool>(0.5), true);
  EXPECT_EQ(from_double<bool>(0.0), false);
  EXPECT_EQ(to_double(Half(1.5f)), 1.5);
  EXPECT_EQ(from_double<BFloat16>(3.0).bits, BFloat16(3.0f).bits);
  EXPECT_EQ(to_double(int64_t{1} << 52), 4503599627370496.0);
}

}  // namespace
}  // namespace nimbus
