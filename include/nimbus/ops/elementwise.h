// Elementwise ops, with NumPy broadcasting for the binary ones.
//
//   Tensor y = add(x, bias);        // x (N, D) + bias (D) -> (N, D)
//   Tensor z = x * 2.0 + 1.0;       // scalars become rank-0 tensors of x's dtype
//   Tensor m = where(greater(x, scalar_like(x, 0)), x, zeros_like(x));
//
// Binary ops need both inputs to have the same dtype (Nimbus never promotes
// silently); comparisons return bool. Math functions need a floating dtype.
#pragma once

#include <string_view>

#include "nimbus/tensor/tensor.h"

namespace nimbus {

// Arithmetic: add, sub, mul, div (floating), pow (floating) and the
// elementwise maximum / minimum (NaN if either input is NaN). Gradients sum
// over broadcast dimensions.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

// Comparisons (bool results, not differentiable).
Tensor equal(const Tensor& a, const Tensor& b);
Tensor not_equal(const Tensor& a, const Tensor& b);
Tensor less(const Tensor& a, const Tensor& b);
Tensor less_equal(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor greater_equal(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);

// cond ? a : b, broadcasting all three; cond is bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// Unary math.
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);  // 1 / sqrt(x)
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);  // -1, 0 or 1
Tensor square(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor isfinite(const Tensor& x);  // bool
Tensor clip(const Tensor& x, double low, double high);

// Activations.
Tensor relu(const Tensor& x);  // max(x, 0); NaN stays NaN
// approximate = "tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
// approximate = "none": x Phi(x) = 0.5 x (1 + erf(x / sqrt(2))).
Tensor gelu(const Tensor& x, std::string_view approximate = "tanh");
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor softplus(const Tensor& x);  // log(1 + exp(x)), computed stably

// Converts dtype (rounding to nearest even for f16/bf16; truncation toward zero for integers).
Tensor cast(const Tensor& x, DType dtype);
// Identity whose gradient is zero: values pass, gradients stop.
Tensor stop_gradient(const Tensor& x);

// Operators: tensor-tensor and tensor-scalar.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

}  // namespace nimbus
