// Graph mode on the GPU: a traced function over CUDA tensors, with scalar
// constants that constant folding evaluates at optimization time, gives the
// CPU's eager result with fusion (NVRTC) on and off. The first GPU run found
// folded constants left on the CPU and read by a CUDA kernel (an illegal address).
#include <gtest/gtest.h>

#include "nimbus/device/backend.h"
#include "nimbus/graph/function.h"
#include "nimbus/nimbus.h"
#include "support/tensor_compare.h"

namespace nimbus {
namespace {

std::vector<Tensor> chain(const std::vector<Tensor>& in) { return {relu(in[0] * 0.5 + in[1]) * 2.0 - 1.0}; }

TEST(CudaGraph, ATracedChainWithScalarConstantsMatchesTheCpu) {
  // Running the traced graph needs a GPU; the `gpu` label runs this where one is lent.
  if (!has_backend(DeviceType::kCUDA)) GTEST_SKIP() << "no CUDA device: the graph runs CUDA kernels";
  const Tensor x = random_normal({1000, 37});
  const Tensor bias = random_normal({37});
  const Tensor expected = chain({x, bias})[0];
  for (const bool jit : {false, true}) {
    SCOPED_TRACE(jit ? "fusion on" : "fusion off");
    Function f = function(chain, {.name = "chain", .graph = true, .jit = jit});
    const Tensor on_gpu = f({x.to(Device::cuda()), bias.to(Device::cuda())})[0];
    EXPECT_EQ(on_gpu.device(), Device::cuda());
    const Tensor back = on_gpu.to(Device::cpu());
    EXPECT_EQ(back.shape(), expected.shape());
    EXPECT_LT(testing::relative_error(back, expected), 1e-6);
  }
}

}  // namespace
}  // namespace nimbus
