// OpProfile: kernels run eagerly and by the graph executor are counted and
// timed by (op, kernel) while a profile is alive, and only then.
#include "nimbus/ops/op_profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nimbus/graph/function.h"
#include "nimbus/nimbus.h"

namespace nimbus {
namespace {

const OpProfile::Entry* find(const std::vector<OpProfile::Entry>& entries, const std::string& op) {
  for (const OpProfile::Entry& entry : entries) {
    if (entry.op == op) return &entry;
  }
  return nullptr;
}

TEST(OpProfile, CountsAndTimesEagerKernelsByOpAndKernel) {
  const Tensor a = random_normal({256, 256});
  const Tensor b = random_normal({256, 256});
  matmul(a, b);  // before the profile: not counted
  OpProfile profile;
  for (int i = 0; i < 3; ++i) matmul(a, b);
  relu(a + b);
  const std::vector<OpProfile::Entry> entries = profile.entries();
  const OpProfile::Entry* product = find(entries, "matmul");
  ASSERT_NE(product, nullptr) << profile.to_string();
  EXPECT_EQ(product->calls, 3);
  EXPECT_EQ(product->kernel, "onednn");
  EXPECT_GT(product->seconds, 0);
  ASSERT_NE(find(entries, "add"), nullptr);
  ASSERT_NE(find(entries, "relu"), nullptr);
  EXPECT_EQ(profile.kernel_calls(), 5);
  EXPECT_EQ(entries.front().op, "matmul") << "the 256^3 products take longest:\n" << profile.to_string();
  EXPECT_THAT(profile.to_string(), ::testing::HasSubstr("onednn"));
  EXPECT_THROW(OpProfile second, InvalidArgument);
}

TEST(OpProfile, SeesTheGraphExecutorsKernels) {
  Function f = function([](const std::vector<Tensor>& in) { return std::vector<Tensor>{sum(in[0] * 2.0, {0})}; },
                        {.name = "f", .jit = false});
  const Tensor x = ones({4, 3});
  f({x});  // trace outside the profile
  OpProfile profile;
  f({x});
  f({x});
  const std::vector<OpProfile::Entry> entries = profile.entries();
  ASSERT_NE(find(entries, "sum"), nullptr) << profile.to_string();
  EXPECT_EQ(find(entries, "sum")->calls, 2);
}

}  // namespace
}  // namespace nimbus
