// Shared machinery of the op tests: seeded inputs, calling an op by name,
// and comparing results. Test-only.
#pragma once

#include <string>
#include <vector>

#include "nimbus/tensor/tensor.h"
#include "op_cases.h"

namespace nimbus::testing {

// Fresh random inputs for a case, seeded by the case's name (the same every run).
// Floating inputs are made in `floating_dtype` (f32 for forward checks, f64 for gradients).
std::vector<Tensor> make_inputs(const OpCase& op_case, DType floating_dtype);

// Runs the case's op through the dispatcher.
std::vector<Tensor> run_case(const OpCase& op_case, const std::vector<Tensor>& inputs);

struct Comparison {
  bool ok = true;
  std::string message;
};

// NaN/Inf parity first, then max |actual - expected| / max(1, max |expected|) <= tolerance.
Comparison compare_tensors(const Tensor& actual, const Tensor& expected, double tolerance);

// Fraction of exactly-zero elements.
double zero_fraction(const Tensor& t);

}  // namespace nimbus::testing
