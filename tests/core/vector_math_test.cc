// The f32 approximations of src/kernels/cpu/vector_math.h against glibc's f64
// functions: maximum error over every 1999th f32 bit pattern of the range
// (about two million inputs per function), within the bounds the header
// states, and IEEE special values (NaN in gives NaN out, infinities, zeros).
#include "src/kernels/cpu/vector_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "src/ops/internal/gelu.h"

namespace nimbus::cpu {
namespace {

using simd::f32x8;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The spacing of f32 values at the exact result (the smallest subnormal below 2^-126).
double f32_ulp(double exact) {
  const double magnitude = std::fabs(exact);
  if (magnitude < 0x1p-126) return 0x1p-149;
  int exponent = 0;
  std::frexp(magnitude, &exponent);
  return std::ldexp(1.0, exponent - 24);
}

struct Worst {
  double ulp = 0;           // |got - exact| in f32 ulps of the exact result
  double scaled_error = 0;  // |got - exact| / max(1, |x|)
  float ulp_at = 0, scaled_at = 0;
};

// Evaluates `f` on every `stride`-th f32 between low and high (inclusive, both finite or infinite)
// against the f64 `exact`, eight at a time. Results where either side is not finite must agree exactly.
template <typename F, typename Exact>
Worst sweep(float low, float high, F f, Exact exact, uint32_t stride = 1999) {
  Worst worst;
  float batch[8];
  int filled = 0;
  auto evaluate = [&]() {
    float got[8];
    simd::store(got, f(simd::load<f32x8>(batch)));
    for (int i = 0; i < filled; ++i) {
      const double x = batch[i], want = exact(x);
      if (!std::isfinite(want) || !std::isfinite(got[i])) {
        EXPECT_TRUE(std::isnan(want) ? std::isnan(got[i]) : static_cast<float>(want) == got[i])
            << "x = " << x << ": got " << got[i] << ", want " << want;
        continue;
      }
      const double error = std::fabs(got[i] - want);
      const double ulps = error / f32_ulp(want), scaled = error / std::max(1.0, std::fabs(x));
      if (ulps > worst.ulp) {
        worst.ulp = ulps;
        worst.ulp_at = batch[i];
      }
      if (scaled > worst.scaled_error) {
        worst.scaled_error = scaled;
        worst.scaled_at = batch[i];
      }
    }
    filled = 0;
  };
  // Walk each sign's bit patterns from 0 outwards.
  auto walk = [&](float from, float to) {
    uint32_t a, b;
    std::memcpy(&a, &from, 4);
    std::memcpy(&b, &to, 4);
    for (uint64_t bits = std::min(a, b); bits <= std::max(a, b); bits += stride) {
      const uint32_t u = static_cast<uint32_t>(bits);
      std::memcpy(&batch[filled++], &u, 4);
      if (filled == 8) evaluate();
    }
  };
  if (low < 0) walk(-0.0f, low);
  if (high >= 0) walk(low > 0 ? low : 0.0f, high);
  for (int i = filled; i < 8; ++i) batch[i] = 0;
  if (filled > 0) evaluate();
  return worst;
}

TEST(VectorMath, Exp) {
  const Worst w = sweep(
      -kInf, kInf, [](f32x8 x) { return vmath::exp(x); }, [](double x) { return std::exp(x); });
  EXPECT_LE(w.ulp, 1.5) << "at " << w.ulp_at;
}

TEST(VectorMath, Log) {
  const Worst w = sweep(
      0.0f, kInf, [](f32x8 x) { return vmath::log(x); }, [](double x) { return std::log(x); });
  EXPECT_LE(w.ulp, 1.5) << "at " << w.ulp_at;
  sweep(
      -kInf, -0.0f, [](f32x8 x) { return vmath::log(x); }, [](double x) { return std::log(x); });
}

TEST(VectorMath, Log1p) {
  const Worst w = sweep(
      -1.0f, kInf, [](f32x8 x) { return vmath::log1p(x); }, [](double x) { return std::log1p(x); });
  EXPECT_LE(w.ulp, 3.0) << "at " << w.ulp_at;
}

TEST(VectorMath, Tanh) {
  const Worst w = sweep(
      -kInf, kInf, [](f32x8 x) { return vmath::tanh(x); }, [](double x) { return std::tanh(x); });
  EXPECT_LE(w.ulp, 2.0) << "at " << w.ulp_at;
}

TEST(VectorMath, Sigmoid) {
  const Worst w = sweep(
      -kInf, kInf, [](f32x8 x) { return vmath::sigmoid(x); }, [](double x) { return 1 / (1 + std::exp(-x)); });
  EXPECT_LE(w.ulp, 3.0) << "at " << w.ulp_at;
}

TEST(VectorMath, Softplus) {
  const Worst w = sweep(
      -kInf, kInf, [](f32x8 x) { return vmath::softplus(x); },
      [](double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); });
  EXPECT_LE(w.ulp, 3.0) << "at " << w.ulp_at;
}

TEST(VectorMath, Erf) {
  const Worst w = sweep(
      -kInf, kInf, [](f32x8 x) { return vmath::erf(x); }, [](double x) { return std::erf(x); });
  EXPECT_LE(w.ulp, 3.0) << "at " << w.ulp_at;
}

// GELU has no useful relative bound where it crosses zero or underflows, so
// its error is bounded relative to max(1, |x|): a few f32 ulps of x.
TEST(VectorMath, Gelu) {
  auto check = [](const char* what, auto f, auto exact) {
    const Worst w = sweep(-1e4f, 1e4f, f, exact);
    EXPECT_LE(w.scaled_error, 3e-7) << what << " at " << w.scaled_at;
  };
  check(
      "gelu tanh", [](f32x8 x) { return vmath::gelu_tanh(x); }, internal::gelu_tanh<double>);
  check(
      "gelu tanh derivative", [](f32x8 x) { return vmath::gelu_tanh_derivative(x); },
      internal::gelu_tanh_derivative<double>);
  check(
      "gelu erf", [](f32x8 x) { return vmath::gelu_erf(x); }, internal::gelu_erf<double>);
  check(
      "gelu erf derivative", [](f32x8 x) { return vmath::gelu_erf_derivative(x); },
      internal::gelu_erf_derivative<double>);
}

// Each lane of one vector: NaN, +-Inf, +-0 and the limits around overflow.
TEST(VectorMath, SpecialValues) {
  const f32x8 x = {kNaN, kInf, -kInf, 0.0f, -0.0f, 89.0f, -104.0f, 1e-40f};
  auto lanes = [](f32x8 v) {
    std::array<float, 8> out;
    simd::store(out.data(), v);
    return out;
  };
  const auto exp = lanes(vmath::exp(x));
  EXPECT_TRUE(std::isnan(exp[0]));
  EXPECT_EQ(exp[1], kInf);
  EXPECT_EQ(exp[2], 0.0f);
  EXPECT_EQ(exp[3], 1.0f);
  EXPECT_EQ(exp[5], kInf);
  EXPECT_EQ(exp[6], 0.0f);
  const auto log = lanes(vmath::log(x));
  EXPECT_TRUE(std::isnan(log[0]));
  EXPECT_EQ(log[1], kInf);
  EXPECT_TRUE(std::isnan(log[2]));
  EXPECT_EQ(log[3], -kInf);
  EXPECT_EQ(log[4], -kInf);
  EXPECT_FLOAT_EQ(log[7], std::log(1e-40f));
  const auto tanh = lanes(vmath::tanh(x));
  EXPECT_TRUE(std::isnan(tanh[0]));
  EXPECT_EQ(tanh[1], 1.0f);
  EXPECT_EQ(tanh[2], -1.0f);
  EXPECT_TRUE(std::signbit(tanh[4]));
  const auto sigmoid = lanes(vmath::sigmoid(x));
  EXPECT_TRUE(std::isnan(sigmoid[0]));
  EXPECT_EQ(sigmoid[1], 1.0f);
  EXPECT_EQ(sigmoid[2], 0.0f);
  EXPECT_EQ(sigmoid[3], 0.5f);
  const auto erf = lanes(vmath::erf(x));
  EXPECT_TRUE(std::isnan(erf[0]));
  EXPECT_EQ(erf[1], 1.0f);
  EXPECT_EQ(erf[2], -1.0f);
  EXPECT_TRUE(std::signbit(erf[4]));
  for (auto f : {vmath::log1p<f32x8>, vmath::softplus<f32x8>, vmath::gelu_tanh<f32x8>, vmath::gelu_erf<f32x8>,
                 vmath::gelu_tanh_derivative<f32x8>, vmath::gelu_erf_derivative<f32x8>}) {
    EXPECT_TRUE(std::isnan(lanes(f(x))[0]));
  }
  EXPECT_EQ(lanes(vmath::softplus(x))[1], kInf);
  EXPECT_EQ(lanes(vmath::gelu_tanh(x))[1], kInf);
  EXPECT_EQ(lanes(vmath::gelu_erf(x))[1], kInf);
}

template <typename F>
NIMBUS_TARGET_AVX512 void evaluate_16_lanes(const std::vector<float>& x, std::vector<float>& y, F f) {
  for (size_t i = 0; i < x.size(); i += 16) simd::store(&y[i], f(simd::load<simd::Vec<float, 64>>(&x[i])));
}
template <typename F>
void evaluate_8_lanes(const std::vector<float>& x, std::vector<float>& y, F f) {
  for (size_t i = 0; i < x.size(); i += 8) simd::store(&y[i], f(simd::load<f32x8>(&x[i])));
}

// The kernels run these functions on 16 lanes where the CPU has AVX-512:
// each lane does the same operations, so the results are the same bits.
TEST(VectorMath, SixteenLanesGiveTheSameBitsAsEight) {
  // Skipped only where there is nothing to compare: without AVX-512 no
  // 16-lane code runs. This project's machines have AVX-512, so it runs here.
  if (!has_avx512()) GTEST_SKIP() << "this CPU has no AVX-512, so the kernels use 8 lanes only";
  std::vector<float> x;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 4099) {
    const uint32_t u = static_cast<uint32_t>(bits);
    float v;
    std::memcpy(&v, &u, 4);
    x.push_back(v);
  }
  for (float special : {kNaN, kInf, -kInf, 0.0f, -0.0f, 89.0f, -104.0f, 1e-40f}) x.push_back(special);
  x.resize((x.size() + 15) / 16 * 16, 1.0f);
  auto expect_same = [&](const char* what, auto f) {
    std::vector<float> narrow(x.size()), wide(x.size());
    evaluate_8_lanes(x, narrow, f);
    evaluate_16_lanes(x, wide, f);
    for (size_t i = 0; i < x.size(); ++i) {
      const bool same = std::memcmp(&narrow[i], &wide[i], 4) == 0 || (std::isnan(narrow[i]) && std::isnan(wide[i]));
      ASSERT_TRUE(same) << what << " at x = " << x[i] << ": " << narrow[i] << " on 8 lanes, " << wide[i] << " on 16";
    }
  };
  expect_same("exp", [](auto v) NIMBUS_LAMBDA_INLINE { return vmath::exp(v); });
  expect_same("log", [](auto v) NIMBUS_LAMBDA_INLINE { return vmath::log(v); });
  expect_same("log1p", [](auto v) NIMBUS_LAMBDA_INLINE { return vmath::log1p(v); });
  expect_same("tanh", [](auto v) NIMBUS_LAMBDA_INLINE { return vmath::tanh(v); });
  expect_same("sigmoid", [](auto v) NIMBUS_LAMBDA_INLINE { return vmath::sigmoid(v); });
  expect_same("softplus", [](auto v) NIMBUS_LAMBDA_INLINE { return vmath::softplus(v); });
  expect_same("erf", [](auto v) NIMBUS_LAMBDA_INLINE { return vmath::erf(v); });
  expect_same("gelu_tanh", [](auto v) NIMBUS_LAMBDA_INLINE { return vmath::gelu_tanh(v); });
  expect_same("gelu_tanh'", [](auto v) NIMBUS_LAMBDA_INLINE { return vmath::gelu_tanh_derivative(v); });
  expect_same("gelu_erf", [](auto v) NIMBUS_LAMBDA_INLINE { return vmath::gelu_erf(v); });
  expect_same("gelu_erf'", [](auto v) NIMBUS_LAMBDA_INLINE { return vmath::gelu_erf_derivative(v); });
}

}  // namespace
}  // namespace nimbus::cpu
