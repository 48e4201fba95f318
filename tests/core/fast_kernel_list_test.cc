// Every fast (non-reference) kernel a build registered when its list was
// written is still registered. A build that silently drops a kernel folder (a
// path pattern in src/CMakeLists.txt, cmake/ or fuzz/CMakeLists.txt) still
// passes the op tests on the reference kernels; this test does not.
//
// The expected list of a build kind is tests/fast_kernels/<kind>.txt (cuda: the
// default build; cpu: -DNIMBUS_CUDA=OFF, whose kernels the fuzz preset's
// support glob also links; gpu_only: -DNIMBUS_GPU_ONLY=ON, in test_cuda).
// Rewrite it from a build of that kind after adding or removing a kernel:
//   NIMBUS_WRITE_FAST_KERNELS=1 build/release/tests/test_core --gtest_filter='FastKernelList.*'
// (in a GPU-only build: build/gpuonly/tests/test_cuda).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "nimbus/base/dtype.h"
#include "nimbus/device/device.h"
#include "nimbus/ops/registry.h"

namespace nimbus {
namespace {

// "op device dtype kernel", one per registered non-reference kernel.
std::set<std::string> registered_fast_kernels() {
  std::set<std::string> lines;
  for (const OpSchema* op : OpRegistry::global().ops()) {
    for (const DeviceType device : {DeviceType::kCPU, DeviceType::kCUDA}) {
      for (int dtype = 0; dtype < kNumDTypes; ++dtype) {
        for (const KernelDef& kernel : op->kernels(device, static_cast<DType>(dtype))) {
          if (kernel.name == kReferenceKernel) continue;
          lines.insert(op->name + " " + std::string(device.name()) + " " +
                       std::string(dtype_name(static_cast<DType>(dtype))) + " " + kernel.name);
        }
      }
    }
  }
  return lines;
}

TEST(FastKernelList, EveryListedKernelIsRegistered) {
  const std::set<std::string> registered = registered_fast_kernels();
  const char* write = std::getenv("NIMBUS_WRITE_FAST_KERNELS");
  if (write != nullptr && std::string(write) == "1") {
    std::ofstream out(NIMBUS_FAST_KERNEL_LIST);
    for (const std::string& line : registered) out << line << "\n";
    ASSERT_TRUE(out.good()) << "cannot write " << NIMBUS_FAST_KERNEL_LIST;
    // Writing the list is not checking it: the run reports a skip, never a pass.
    GTEST_SKIP() << "wrote " << registered.size() << " kernels to " << NIMBUS_FAST_KERNEL_LIST;
  }
  std::ifstream in(NIMBUS_FAST_KERNEL_LIST);
  ASSERT_TRUE(in.good()) << "cannot read " << NIMBUS_FAST_KERNEL_LIST;
  size_t listed = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    ++listed;
    EXPECT_TRUE(registered.contains(line)) << "this build lost a fast kernel: " << line;
  }
  EXPECT_GT(listed, 0u) << NIMBUS_FAST_KERNEL_LIST << " is empty";
}

}  // namespace
}  // namespace nimbus
