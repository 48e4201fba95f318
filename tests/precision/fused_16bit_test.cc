// The CPU's 16-bit paths that compute in f32 without a widened copy of each
// tensor: fused_elementwise programs over f16 and bf16 (inputs widened once
// per block, every instruction in f32, rounded at casts to 16 bits and at the
// store), the reductions and the pooling gradients. Each is checked against
// an independent scalar loop (f32 arithmetic, the scalar conversions of
// base/half.h) bit for bit, over many blocks with a partial last one, with
// rounding ties, overflow, inf and NaN; and the fused kernel against the
// fused op's reference kernel.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "nimbus/base/half.h"
#include "nimbus/device/backend.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/fused_elementwise.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/registry.h"
#include "tests/support/tensor_compare.h"

namespace nimbus {
namespace {

using testing::bit_identical;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

template <typename T>
DType dtype_of() {
  return std::is_same_v<T, Half> ? DType::kF16 : DType::kBF16;
}

// f32 values rounded to T, as T.
template <typename T>
Tensor tensor_of(const std::vector<float>& values, const Shape& shape) {
  std::vector<T> stored;
  for (float v : values) stored.push_back(T(v));
  return Tensor::from_vector<T>(stored, shape);
}

template <typename T>
float held(T value) {
  return static_cast<float>(value);
}

// Random values of a 16-bit type, with infinities and NaNs among them.
template <typename T>
std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> values;
  for (int64_t i = 0; i < n; ++i) values.push_back(held(T(normal(rng))));
  values[3] = kInf;
  values[11] = -kInf;
  values[17] = kNaN;
  return values;
}

// Same bits, NaN payloads aside (every NaN a NaN).
template <typename T>
void expect_same(const std::vector<T>& actual, const std::vector<float>& expected, const char* what) {
  ASSERT_EQ(actual.size(), expected.size());
  int64_t mismatches = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const float a = held(actual[i]);
    const bool same =
        std::isnan(expected[i]) ? std::isnan(a) : std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(expected[i]);
    if (!same && ++mismatches <= 5) ADD_FAILURE() << what << "[" << i << "]: " << a << ", expected " << expected[i];
  }
  EXPECT_EQ(mismatches, 0) << what;
}

// Runs `program` on `inputs` with the dispatch's kernel and with the reference kernel.
std::pair<std::vector<Tensor>, std::vector<Tensor>> run_both(std::shared_ptr<ExpressionProgram> program,
                                                             const std::vector<Tensor>& inputs, const Shape& shape) {
  std::vector<Tensor> fast = fused_elementwise(inputs, program, shape);
  std::vector<Tensor> reference;
  {
    ReferenceKernelsScope scope;
    reference = fused_elementwise(inputs, program, shape);
  }
  return {fast, reference};
}

const OpSchema& op(const char* name) { return OpRegistry::global().get(name); }

template <typename T>
class Fused16 : public ::testing::Test {};
using SixteenBitTypes = ::testing::Types<Half, BFloat16>;
TYPED_TEST_SUITE(Fused16, SixteenBitTypes);

// A layer's forward and backward pieces in one program over many blocks (a partial last one): a product,
// a bias (rows), a column broadcast (gathered), a 16-bit scalar, relu, a comparison, where, a cast to f32
// (free) and a cast back to 16 bits (rounds). Every output against a scalar loop in f32.
TYPED_TEST(Fused16, ProgramComputesInF32AndRoundsAtCastsAndStores) {
  using T = TypeParam;
  const DType half = dtype_of<T>();
  constexpr int64_t kRows = 70, kColumns = 333;  // 23310 elements: 2 full blocks and a partial one
  const Shape shape{kRows, kColumns};
  const std::vector<float> x = random_values<T>(kRows * kColumns, 1), w = random_values<T>(kRows * kColumns, 2);
  const std::vector<float> bias = random_values<T>(kColumns, 3), column = random_values<T>(kRows, 4);
  const float scale = held(T(0.3f)), f32_factor = 1.0f / 3.0f;
  const std::vector<Tensor> inputs = {
      tensor_of<T>(x, shape),           tensor_of<T>(w, shape),    tensor_of<T>(bias, {kColumns}),
      tensor_of<T>(column, {kRows, 1}), tensor_of<T>({scale}, {}), Tensor::from_vector<float>({f32_factor}, {}),
  };
  auto program = std::make_shared<ExpressionProgram>();
  program->instructions = {
      {.op = &op("mul"), .operands = {{true, 0}, {true, 1}}, .dtype = half},                     // t0 = x * w
      {.op = &op("add"), .operands = {{false, 0}, {true, 2}}, .dtype = half},                    // t1 = t0 + bias
      {.op = &op("mul"), .operands = {{false, 1}, {true, 4}}, .dtype = half},                    // t2 = t1 * scale
      {.op = &op("relu"), .operands = {{false, 2}}, .dtype = half},                              // t3
      {.op = &op("cast"), .attrs = {{"dtype", DType::kF32}}, .operands = {{false, 3}}},          // t4 (free)
      {.op = &op("mul"), .operands = {{false, 4}, {true, 5}}},                                   // t5 = t4 / 3 in f32
      {.op = &op("cast"), .attrs = {{"dtype", half}}, .operands = {{false, 5}}, .dtype = half},  // t6 rounds
      {.op = &op("greater"), .operands = {{false, 6}, {true, 3}}, .dtype = DType::kBool},        // t7
      {.op = &op("where"), .operands = {{false, 7}, {false, 6}, {false, 1}}, .dtype = half},     // t8
  };
  program->outputs = {8, 5, 7, 1};
  const auto [fast, reference] = run_both(program, inputs, shape);

  std::vector<float> t8, t5, t1;
  std::vector<uint8_t> t7;
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kColumns; ++c) {
      const size_t i = static_cast<size_t>(r * kColumns + c);
      const float v1 = x[i] * w[i] + bias[static_cast<size_t>(c)];  // held in f32: no rounding in between
      const float v3 = v1 * scale < 0 ? 0.0f : v1 * scale;
      const float v5 = v3 * f32_factor;
      const float v6 = held(T(v5));
      const bool v7 = v6 > column[static_cast<size_t>(r)];
      t8.push_back(held(T(v7 ? v6 : v1)));
      t5.push_back(v5);
      t7.push_back(v7);
      t1.push_back(held(T(v1)));
    }
  }
  expect_same(fast[0].template to_vector<T>(), t8, "where output");
  expect_same(fast[3].template to_vector<T>(), t1, "bias-add output");
  const std::vector<float> f32_out = fast[1].template to_vector<float>();
  expect_same(std::vector<float>(f32_out.begin(), f32_out.end()), t5, "f32 output");
  std::vector<uint8_t> mask;
  for (bool b : fast[2].template to_vector<bool>()) mask.push_back(b);
  EXPECT_EQ(mask, t7);
  for (size_t k = 0; k < fast.size(); ++k) EXPECT_TRUE(bit_identical(fast[k], reference[k])) << "output " << k;
}

// The store rounds to nearest even; intermediates are not rounded, so two half-ulp steps make one ulp
// where per-op rounding (each tie to even) would lose both; an intermediate past f16's range comes back.
TYPED_TEST(Fused16, RoundsOnceAtTheStoreToNearestEven) {
  using T = TypeParam;
  const DType half = dtype_of<T>();
  const bool f16 = std::is_same_v<T, Half>;
  const float half_ulp = f16 ? 0x1p-11f : 0x1p-8f;  // of 1.0
  // a + b: 1 + half_ulp ties to 1; (1 + ulp) + half_ulp ties to 1 + 2 ulp (even); NaN and infinities pass.
  const std::vector<float> a = {1.0f, 1.0f + 2 * half_ulp, -1.0f, kNaN, kInf, 1.0f};
  const std::vector<float> b = {half_ulp, half_ulp, -half_ulp, 1.0f, 1.0f, -kInf};
  const Shape shape{static_cast<int64_t>(a.size())};
  auto program = std::make_shared<ExpressionProgram>();
  program->instructions = {
      {.op = &op("add"), .operands = {{true, 0}, {true, 1}}, .dtype = half},   // t0 = a + b, held
      {.op = &op("add"), .operands = {{false, 0}, {true, 1}}, .dtype = half},  // t1 = t0 + b
  };
  program->outputs = {0, 1};
  const std::vector<Tensor> inputs = {tensor_of<T>(a, shape), tensor_of<T>(b, shape)};
  const auto [fast, reference] = run_both(program, inputs, shape);
  const float ulp = 2 * half_ulp;
  expect_same(fast[0].template to_vector<T>(), {1.0f, 1.0f + 2 * ulp, -1.0f, kNaN, kInf, -kInf}, "a + b");
  // 1 + half_ulp + half_ulp is exactly 1 + ulp; per-op rounding would give 1.
  expect_same(fast[1].template to_vector<T>(), {1.0f + ulp, 1.0f + 2 * ulp, -1.0f - ulp, kNaN, kInf, -kInf},
              "a + b + b");
  for (size_t k = 0; k < fast.size(); ++k) EXPECT_TRUE(bit_identical(fast[k], reference[k])) << "output " << k;

  // Overflow: 60000 * 4 is past f16's range; held in f32 it comes back under it, and only a result
  // past the range at the store becomes inf.
  auto scaled = std::make_shared<ExpressionProgram>();
  scaled->instructions = {
      {.op = &op("mul"), .operands = {{true, 0}, {true, 1}}, .dtype = half},
      {.op = &op("mul"), .operands = {{false, 0}, {true, 2}}, .dtype = half},
  };
  scaled->outputs = {0, 1};
  const Tensor big = tensor_of<T>({60000.0f, -60000.0f}, {2});
  const auto [wide, wide_reference] =
      run_both(scaled, {big, tensor_of<T>({4.0f}, {}), tensor_of<T>({0.25f}, {})}, Shape{2});
  const float product = f16 ? kInf : held(T(240000.0f));
  expect_same(wide[0].template to_vector<T>(), {product, -product}, "x * 4");
  expect_same(wide[1].template to_vector<T>(), {held(T(60000.0f)), held(T(-60000.0f))}, "x * 4 / 4");
  for (size_t k = 0; k < wide.size(); ++k) EXPECT_TRUE(bit_identical(wide[k], wide_reference[k])) << "output " << k;
}

// A cast to 16 bits inside a program rounds there (a value held in f32 is rounded in place), NaN kept.
TYPED_TEST(Fused16, CastToSixteenBitsRoundsInsideTheProgram) {
  using T = TypeParam;
  const DType half = dtype_of<T>();
  const float below_tie = std::is_same_v<T, Half> ? 1.0f + 0x1p-12f : 1.0f + 0x1p-9f;  // rounds to 1
  const std::vector<float> x = {below_tie, 3.0f, kNaN, -kInf, 1e30f};
  auto program = std::make_shared<ExpressionProgram>();
  program->instructions = {
      {.op = &op("cast"), .attrs = {{"dtype", half}}, .operands = {{true, 0}}, .dtype = half},
      {.op = &op("cast"), .attrs = {{"dtype", DType::kF32}}, .operands = {{false, 0}}},
      {.op = &op("mul"), .operands = {{false, 1}, {true, 1}}},
  };
  program->outputs = {2};
  const Shape shape{static_cast<int64_t>(x.size())};
  const std::vector<Tensor> inputs = {Tensor::from_vector<float>(x, shape), Tensor::from_vector<float>({2.0f}, {})};
  const auto [fast, reference] = run_both(program, inputs, shape);
  std::vector<float> expected;
  for (float v : x) expected.push_back(held(T(v)) * 2.0f);
  expect_same(fast[0].template to_vector<float>(), expected, "cast then * 2");
  EXPECT_TRUE(bit_identical(fast[0], reference[0]));
}

// sum and reduce_max over rows and over leading axes (a bias gradient), and max pooling's gradient:
// the 16-bit kernels equal the f32 kernels run on the widened tensor, rounded once.
TYPED_TEST(Fused16, ReductionsAndPoolGradientsEqualTheF32KernelsRoundedOnce) {
  using T = TypeParam;
  const DType half = dtype_of<T>();
  const Shape shape{64, 10, 10, 48};
  std::vector<float> values = random_values<T>(shape.numel(), 5);
  for (float& v : values) v = std::isfinite(v) ? v : 1.0f;  // NaN would make every sum NaN
  const Tensor x = tensor_of<T>(values, shape);
  const Tensor wide = x.to(DType::kF32);
  for (const std::vector<int64_t>& axes : std::vector<std::vector<int64_t>>{{0, 1, 2}, {3}, {1, 2, 3}, {0, 1, 2, 3}}) {
    EXPECT_TRUE(bit_identical(sum(x, axes), sum(wide, axes).to(half))) << "sum over " << axes.size() << " axes";
    EXPECT_TRUE(bit_identical(reduce_max(x, axes), reduce_max(wide, axes).to(half)));
  }
  const Tensor pooled = max_pool2d(x, {.pool_size = {2, 2}});
  const Tensor grad = tensor_of<T>(random_values<T>(pooled.numel(), 6), pooled.shape());
  const Tensor grad_x = max_pool2d_backward(grad, x, {.pool_size = {2, 2}});
  const Tensor wide_grad_x = max_pool2d_backward(grad.to(DType::kF32), wide, {.pool_size = {2, 2}});
  EXPECT_TRUE(bit_identical(grad_x, wide_grad_x.to(half)));
}

}  // namespace
}  // namespace nimbus
