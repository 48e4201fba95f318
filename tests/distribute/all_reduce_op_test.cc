// The all_reduce op, eager and traced, across the replicas of a Mirrored strategy.
#include <gtest/gtest.h>

#include "nimbus/device/logical_devices.h"
#include "nimbus/distribute/all_reduce.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/graph/function.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "train/train_test_util.h"

namespace nimbus::testing {
namespace {

class AllReduceOp : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { set_logical_cpu_devices({{.threads = 1}, {.threads = 1}}); }
  void TearDown() override { set_logical_cpu_devices({}); }
};

TEST_P(AllReduceOp, SumsEachBucketOverTheReplicas) {
  const bool graph = GetParam();
  auto strategy = distribute::Mirrored({Device::cpu(0), Device::cpu(1)});
  // Replica r's gradients: a = (r + 1) * [1 2 3 4 5 6], b = (r + 1) * [10 20]; three buckets in all.
  auto body = [](const std::vector<Tensor>& in) {
    const Tensor a = in[0] * 2.0, b = in[1] + 0.0;
    std::vector<Tensor> out = distribute::all_reduce_gradients({a, b, a * 3.0}, /*bucket_bytes=*/4);
    return out;
  };
  std::vector<std::vector<Tensor>> results(2);
  std::vector<Function> steps;
  for (int r = 0; r < 2; ++r) steps.push_back(function(body, {.name = "buckets", .graph = graph}));
  for (int run = 0; run < 2; ++run) {
    strategy->run([&](int local) {
      const float scale = float(local + 1);
      const Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}) * double(scale);
      const Tensor b = Tensor::from_vector<float>({10, 20}, {2}) * double(scale);
      results[static_cast<size_t>(local)] = steps[static_cast<size_t>(local)]({a, b});
    });
    for (int r = 0; r < 2; ++r) {
      SCOPED_TRACE(::testing::Message() << "run " << run << " replica " << r);
      const auto& out = results[static_cast<size_t>(r)];
      EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{6, 12, 18, 24, 30, 36}));
      EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{30, 60}));
      EXPECT_EQ(out[2].to_vector<float>(), (std::vector<float>{18, 36, 54, 72, 90, 108}));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, AllReduceOp, ::testing::Values(false, true),
                         [](const auto& info) { return std::string(info.param ? "Graph" : "Eager"); });

TEST(AllReduceOpOutsideReplicas, IsTheIdentity) {
  const Tensor a = Tensor::from_vector<float>({1, 2, 3}, {3});
  const std::vector<Tensor> out = distribute::all_reduce_sum({a});
  EXPECT_EQ(out[0].to_vector<float>(), a.to_vector<float>());
}

}  // namespace
}  // namespace nimbus::testing
