// Test cases for ops. Every op in the registry needs at least one case (the
// registry walk test enforces it); each case runs in
//   OpForward/<case>: the dispatched (fast) kernel against the reference kernel, in f32;
//   OpGrad/<case>:    autodiff against central finite differences, in f64.
//
//   NIMBUS_OP_CASES(elementwise_binary) {
//     add_op_case({.name = "add_broadcast_rows", .op = "add", .inputs = {{{4, 3}}, {{3}}}});
//   }
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "nimbus/ops/attrs.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus::testing {

// How to fill one input: uniform values in [low, high) (integers for integer
// dtypes, coin flips for bool), or exactly `values` when given.
struct InputSpec {
  Shape shape;
  DType dtype = DType::kF32;
  double low = -2.0;
  double high = 2.0;
  std::vector<double> values = {};
  // Keep `dtype` when the case runs its floating inputs in another dtype (adam_update's f64 scalars).
  bool fixed_dtype = false;
};

struct OpCase {
  std::string name;  // unique; letters, digits and '_'
  std::string op;    // the registry name
  std::vector<InputSpec> inputs = {};
  Attrs attrs = {};
  // Largest normalized error of the fast kernel against the reference, f32.
  double forward_tolerance = 1e-5;
  // Largest error of autodiff against finite differences, f64:
  // |autodiff - numeric| <= grad_tolerance * max(1, |numeric|) per element.
  double grad_tolerance = 1e-6;
  // Which outputs the gradient check's loss sums (empty: every floating output).
  std::vector<int> loss_outputs = {};
  // Outputs whose elements may be mostly zero (masks, padding) without failing the zero guard.
  bool allow_mostly_zero = false;
  // False skips the f64 gradient check for this case (say why next to it);
  // cases without a floating input or output never run it.
  bool check_gradient = true;
};

// gtest prints the case by name.
inline void PrintTo(const OpCase& op_case, std::ostream* os) { *os << op_case.name; }

void add_op_case(OpCase op_case);
const std::vector<OpCase>& op_cases();

}  // namespace nimbus::testing

#define NIMBUS_OP_CASES(family)                                                                             \
  static void register_##family##_op_cases();                                                               \
  [[maybe_unused]] static const bool family##_op_cases_registered = (register_##family##_op_cases(), true); \
  static void register_##family##_op_cases()
