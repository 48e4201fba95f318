// The registry walk: adding an op without its reference kernel, its gradient
// rule (or an explicit "not differentiable"), its precision rule and its test
// cases fails here.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>

#include "nimbus/ops/registry.h"
#include "op_cases.h"

namespace nimbus::testing {
namespace {

TEST(OpRegistry, EveryOpHasReferenceKernelGradientRuleAndTests) {
  // Each case of a differentiable op also runs the gradient check (op_gradient_test.cc).
  std::set<std::string> with_cases;
  for (const OpCase& c : op_cases()) with_cases.insert(c.op);
  const auto ops = OpRegistry::global().ops();
  ASSERT_GT(ops.size(), 50u) << "the registry looks empty: static registration did not run";
  for (const OpSchema* op : ops) {
    SCOPED_TRACE(op->name);
    EXPECT_FALSE(op->reference_dtypes().empty()) << op->name << " has no CPU reference kernel";
    EXPECT_TRUE(op->differentiable ? op->gradient != nullptr : op->gradient == nullptr)
        << op->name << " must have a gradient rule or be marked not differentiable";
    EXPECT_TRUE(op->precision.has_value())
        << op->name << " has no precision rule: set .precision in its define_op (ops/precision_rule.h)";
    EXPECT_TRUE(with_cases.count(op->name)) << op->name << " has no test case in tests/core/cases_*.cc";
    EXPECT_FALSE(op->summary.empty()) << op->name << " has no summary for docs/ops.md";
  }
}

TEST(OpRegistry, NoKernelsForUndefinedOps) {
  EXPECT_TRUE(OpRegistry::global().orphan_kernel_names().empty())
      << "kernels registered for op names that were never defined (a typo?)";
}

TEST(OpRegistry, EveryCaseNamesAKnownOpAndIsUnique) {
  std::set<std::string> names;
  for (const OpCase& c : op_cases()) {
    EXPECT_NE(OpRegistry::global().find(c.op), nullptr) << "case " << c.name << " names unknown op " << c.op;
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case name " << c.name;
  }
}

TEST(OpRegistry, ReferenceKernelsComeLast) {
  for (const OpSchema* op : OpRegistry::global().ops()) {
    for (DType dtype : op->reference_dtypes()) {
      const auto& kernels = op->kernels(DeviceType::kCPU, dtype);
      EXPECT_EQ(kernels.back().name, kReferenceKernel) << op->name << " " << dtype_name(dtype);
    }
  }
}

}  // namespace
}  // namespace nimbus::testing

namespace nimbus::testing {
namespace {

TEST(OpRegistry, DocsOpListIsCurrent) {
  std::ifstream file("docs/ops.md");
  ASSERT_TRUE(file) << "docs/ops.md is missing; write it with: build/release/tools/nimbus/nimbus ops > docs/ops.md";
  const std::string on_disk((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(on_disk, op_list_markdown())
      << "docs/ops.md is out of date; regenerate it with: build/release/tools/nimbus/nimbus ops > docs/ops.md";
}

}  // namespace
}  // namespace nimbus::testing
