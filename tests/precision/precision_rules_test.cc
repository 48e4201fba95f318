// The per-op precision rules and autocast: the rules the issue names hold (the
// registry walk checks that every op has one), and an op call under
// AutocastScope computes in the dtype its rule says, with gradients that reach
// the f32 variables.
#include <gtest/gtest.h>

#include <optional>

#include "nimbus/autodiff/gradient_tape.h"
#include "nimbus/autodiff/variable.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/precision.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/registry.h"
#include "tests/support/tensor_compare.h"

namespace nimbus {
namespace {

std::optional<PrecisionRule> precision_rule(const char* op) { return OpRegistry::global().get(op).precision; }

TEST(OpPrecision, TheRulesTheIssueNames) {
  for (const char* op :
       {"matmul", "fused_matmul", "conv2d", "conv2d_backward_input", "conv2d_backward_filter", "fused_conv2d"}) {
    EXPECT_EQ(precision_rule(op), PrecisionRule::kComputeDType) << op;
  }
  for (const char* op : {"softmax", "log_softmax", "softmax_cross_entropy", "sparse_softmax_cross_entropy", "exp",
                         "log", "pow", "sum", "mean", "variance", "batch_norm_training", "layer_norm"}) {
    EXPECT_EQ(precision_rule(op), PrecisionRule::kFloat32) << op;
  }
  for (const char* op : {"add", "relu", "reshape", "max_pool2d", "gelu"}) {
    EXPECT_EQ(precision_rule(op), PrecisionRule::kFollowInputs) << op;
  }
  EXPECT_EQ(precision_rule("assign"), PrecisionRule::kKeepInputs);
}

TEST(Autocast, OpsComputeInTheDtypeTheirRuleSays) {
  const Tensor a = random_uniform({4, 8}, -1, 1), b = random_uniform({8, 3}, -1, 1);
  const Tensor bias = random_uniform({3}, -1, 1);
  for (DType compute : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(compute));
    AutocastScope autocast(compute);
    EXPECT_EQ(autocast_dtype(), compute);
    const Tensor y = matmul(a, b);
    EXPECT_EQ(y.dtype(), compute);
    // Follows its inputs: f16 and f32 differ, so both become the compute dtype.
    const Tensor z = add(y, bias);
    EXPECT_EQ(z.dtype(), compute);
    EXPECT_EQ(relu(z).dtype(), compute);
    EXPECT_EQ(softmax(z).dtype(), DType::kF32);
    EXPECT_EQ(sum(z).dtype(), DType::kF32);
    EXPECT_EQ(exp(z).dtype(), DType::kF32);
    // Same dtypes: nothing to cast.
    EXPECT_EQ(add(bias, bias).dtype(), DType::kF32);
    // f64 is never cast.
    EXPECT_EQ(matmul(a.to(DType::kF64), b.to(DType::kF64)).dtype(), DType::kF64);
    // The result is the f32 product rounded once.
    EXPECT_TRUE(
        testing::bit_identical(y, cast(matmul(a.to(compute).to(DType::kF32), b.to(compute).to(DType::kF32)), compute)));
  }
  EXPECT_EQ(autocast_dtype(), DType::kF32);
  // Outside autocast, mixed dtypes are refused as always.
  EXPECT_THROW(add(a.to(DType::kF16), a), InvalidArgument);
}

TEST(Autocast, GradientsReachF32VariablesInF32) {
  const Variable w(random_uniform({8, 3}, -1, 1), "w");
  const Tensor x = random_uniform({4, 8}, -1, 1);
  auto loss_gradient = [&](bool mixed) {
    GradientTape tape;
    Tensor logits;
    {
      std::optional<AutocastScope> autocast;
      if (mixed) autocast.emplace(DType::kF16);
      logits = matmul(x, w.value());
    }
    const Tensor loss = sum(square(cast(logits, DType::kF32)));
    return tape.gradient(loss, std::vector<Variable>{w})[0];
  };
  const Tensor mixed = loss_gradient(true), reference = loss_gradient(false);
  EXPECT_EQ(mixed.dtype(), DType::kF32);
  const std::vector<double> m = mixed.to_vector<double>(), r = reference.to_vector<double>();
  for (size_t i = 0; i < r.size(); ++i) EXPECT_NEAR(m[i], r[i], 2e-2 * (1 + std::abs(r[i]))) << i;
}

}  // namespace
}  // namespace nimbus
