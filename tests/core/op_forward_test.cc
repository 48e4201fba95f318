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

class OpForward : public ::testing::TestWithParam<OpCase> {};

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

INSTANTIATE_TEST_SUITE_P(Ops, OpForward, ::testing::ValuesIn(op_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

}  // namespace
}  // namespace nimbus::testing
