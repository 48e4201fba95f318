// OpForwardBF16: the ops that have oneDNN's native bf16 primitives on a CPU
// with avx512_bf16 (matmul, convolutions and their gradients, pooling), run
// on bf16 inputs made from the harness's cases: the kernel dispatch picks
// against the reference loop on the same bf16 inputs.
// Error bar: both accumulate in f32 and round the result to bf16 once, so
// they may differ by the rounding of slightly different sums: normalized error
// (op_harness.h) <= 2 bf16 ulps of the largest output, 2 * 2^-7.
#include <gtest/gtest.h>

#include <algorithm>
#include <string_view>

#include "nimbus/device/backend.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/registry.h"
#include "op_harness.h"
#include "src/kernels/cpu/onednn.h"

namespace nimbus::testing {
namespace {

constexpr double kBF16Tolerance = 2.0 / 128;

constexpr std::string_view kNativeBF16Ops[] = {
    "matmul",     "fused_matmul", "conv2d", "fused_conv2d", "conv2d_backward_input", "conv2d_backward_filter",
    "max_pool2d", "avg_pool2d"};

std::vector<OpCase> native_bf16_cases() {
  std::vector<OpCase> result;
  for (const OpCase& c : op_cases()) {
    if (std::find(std::begin(kNativeBF16Ops), std::end(kNativeBF16Ops), c.op) != std::end(kNativeBF16Ops)) {
      result.push_back(c);
    }
  }
  return result;
}

class OpForwardBF16 : public ::testing::TestWithParam<OpCase> {};

TEST(OpForwardBF16Cases, CoverEveryNativeOp) {
  for (std::string_view op : kNativeBF16Ops) {
    const std::vector<OpCase> cases = native_bf16_cases();
    EXPECT_TRUE(std::any_of(cases.begin(), cases.end(), [&](const OpCase& c) { return c.op == op; }))
        << op << " has no harness case";
  }
}

TEST_P(OpForwardBF16, MatchesReference) {
  const OpCase& c = GetParam();
  const std::vector<Tensor> inputs = make_inputs(c, DType::kBF16);
  std::vector<Tensor> fast = run_case(c, inputs);
  std::vector<Tensor> reference;
  {
    ReferenceKernelsScope scope;
    reference = run_case(c, inputs);
  }
  ASSERT_EQ(fast.size(), reference.size());
  for (size_t i = 0; i < fast.size(); ++i) {
    EXPECT_EQ(fast[i].dtype(), DType::kBF16);
    const Comparison result = compare_tensors(fast[i], reference[i], kBF16Tolerance);
    EXPECT_TRUE(result.ok) << c.op << " output " << i << ": " << result.message;
  }
  // Where the CPU has avx512_bf16 the dispatch must pick oneDNN's native kernel.
  const OpSchema& op = OpRegistry::global().get(c.op);
  KernelContext context{op, c.attrs, inputs, fast, default_stream_for(inputs[0].device())};
  const std::string_view expected = cpu::dnnl_has_native_bf16() ? "onednn" : "widened_f32";
  EXPECT_EQ(select_kernel(context).name, expected) << c.op;
}

INSTANTIATE_TEST_SUITE_P(Ops, OpForwardBF16, ::testing::ValuesIn(native_bf16_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

}  // namespace
}  // namespace nimbus::testing
