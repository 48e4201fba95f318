// OpForward: for every case, the kernel dispatch picks (oneDNN, vectorized)
// against the plain reference loop, on the same seeded f32 inputs.
// Error bar: normalized error (max |fast - ref| / max(1, max |ref|)) <= the
// case's forward_tolerance, 1e-5 unless the case states otherwise; NaN and
// Inf must appear in the same places.
#include <gtest/gtest.h>

#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/registry.h"
#include "op_harness.h"

namespace nimbus::testing {
namespace {

// Cases of pure ops (OpForward) and of ops that write into their inputs (OpSideEffects).
std::vector<OpCase> cases_with_side_effects(bool side_effects) {
  std::vector<OpCase> result;
  for (const OpCase& c : op_cases()) {
    const OpSchema* op = OpRegistry::global().find(c.op);
    if (op != nullptr && op->has_side_effects == side_effects) result.push_back(c);
  }
  return result;
}

class OpForward : public ::testing::TestWithParam<OpCase> {};
class OpSideEffects : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpForward, MatchesReference) {
  const OpCase& c = GetParam();
  const std::vector<Tensor> inputs = make_inputs(c, DType::kF32);
  const std::vector<Tensor> fast = run_case(c, inputs);
  std::vector<Tensor> reference;
  {
    ReferenceKernelsScope scope;
    reference = run_case(c, inputs);
  }
  ASSERT_EQ(fast.size(), reference.size());
  for (size_t i = 0; i < fast.size(); ++i) {
    const Comparison result = compare_tensors(fast[i], reference[i], c.forward_tolerance);
    EXPECT_TRUE(result.ok) << c.op << " output " << i << ": " << result.message;
    if (!c.allow_mostly_zero && reference[i].numel() >= 8 && reference[i].dtype() != DType::kBool) {
      EXPECT_LT(zero_fraction(reference[i]), 0.9)
          << c.op << " output " << i << " is mostly zeros: the case does not exercise the op";
    }
  }
  // Inputs are never modified by an op.
  const std::vector<Tensor> again = make_inputs(c, DType::kF32);
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_TRUE(compare_tensors(inputs[i], again[i], 0).ok) << c.op << " modified input " << i;
  }
}

// Ops that write into their leading inputs (assign, adam_update): each kernel runs on its own fresh
// inputs, and the written tensors must agree; the other inputs stay unchanged.
TEST_P(OpSideEffects, WrittenTensorsMatchReference) {
  const OpCase& c = GetParam();
  const size_t written = OpRegistry::global().get(c.op).written_inputs(c.attrs);
  ASSERT_GE(written, 1u);
  const std::vector<Tensor> fast_inputs = make_inputs(c, DType::kF32);
  const std::vector<Tensor> reference_inputs = make_inputs(c, DType::kF32);
  run_case(c, fast_inputs);
  {
    ReferenceKernelsScope scope;
    run_case(c, reference_inputs);
  }
  const std::vector<Tensor> fresh = make_inputs(c, DType::kF32);
  for (size_t i = 0; i < fast_inputs.size(); ++i) {
    if (i < written) {
      const Comparison result = compare_tensors(fast_inputs[i], reference_inputs[i], c.forward_tolerance);
      EXPECT_TRUE(result.ok) << c.op << " wrote input " << i << ": " << result.message;
      EXPECT_FALSE(compare_tensors(fast_inputs[i], fresh[i], 0).ok) << c.op << " did not write input " << i;
    } else {
      EXPECT_TRUE(compare_tensors(fast_inputs[i], fresh[i], 0).ok) << c.op << " modified input " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, OpForward, ::testing::ValuesIn(cases_with_side_effects(false)),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Ops, OpSideEffects, ::testing::ValuesIn(cases_with_side_effects(true)),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

}  // namespace
}  // namespace nimbus::testing
