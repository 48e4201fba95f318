// Without an NVIDIA driver (this machine, CI) the CUDA backend is registered
// with no devices, asking for it says what is missing, and the CLI reports
// it as an error instead of crashing. libnimbus never links the driver
// library, so it loads where there is none, nor cuBLASLt and NVRTC, which load on first use.
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nimbus/base/error.h"
#include "nimbus/device/backend.h"
#include "nimbus/tensor/tensor.h"
#include "support/run_command.h"

namespace nimbus {
namespace {

using ::testing::HasSubstr;

bool gpu_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

TEST(CudaNoDriver, TheBackendSaysWhatIsMissing) {
  // The no-driver path exists only where no GPU and driver are present.
  if (gpu_present()) GTEST_SKIP() << "a GPU is present: the no-driver path cannot be seen here";
  EXPECT_FALSE(has_backend(DeviceType::kCUDA));
  try {
    backend(DeviceType::kCUDA);
    FAIL() << "backend(kCUDA) returned without a GPU";
  } catch (const Unavailable& e) {
    EXPECT_THAT(e.message(), HasSubstr("the cuda backend found no devices on this machine: "));
    // No driver library, the driver's error, or no GPU: the reason says which.
    EXPECT_THAT(e.message(), ::testing::AnyOf(HasSubstr("no NVIDIA driver: libcuda.so.1"),
                                              HasSubstr("the NVIDIA driver failed: cudaGetDeviceCount returned"),
                                              HasSubstr("the NVIDIA driver reports no GPU")));
  }
  EXPECT_THROW(Tensor::empty(Shape{4}, DType::kF32, Device::cuda()), Unavailable);
}

#ifdef NIMBUS_CLI
TEST(CudaNoDriver, TrainOnCudaIsAClearError) {
  // The no-driver path exists only where no GPU and driver are present.
  if (gpu_present()) GTEST_SKIP() << "a GPU is present: the no-driver path cannot be seen here";
  const std::string output = testing::run_command(std::string(NIMBUS_CLI) +
                                                  " train examples/fashion_mnist_mlp.yaml --set runtime.device=cuda "
                                                  "--set fit.epochs=1 2>&1; echo \"exit=$?\"");
  EXPECT_THAT(output, HasSubstr("unavailable: runtime.device: cuda: ")) << output;
  EXPECT_THAT(output, HasSubstr("NVIDIA driver")) << output;
  EXPECT_THAT(output, ::testing::Not(HasSubstr("exit=0"))) << output;
  // An error exit, not a signal (a crash would be 128 + the signal).
  EXPECT_THAT(output, ::testing::ContainsRegex("exit=[1-9]\n")) << output;
}

TEST(CudaNoDriver, InfoListsTheCpuAndSaysWhyCudaIsMissing) {
  // The no-driver path exists only where no GPU and driver are present.
  if (gpu_present()) GTEST_SKIP() << "a GPU is present: the no-driver path cannot be seen here";
  const std::string output = testing::run_command(std::string(NIMBUS_CLI) + " info 2>&1; echo \"exit=$?\"");
  EXPECT_THAT(output, HasSubstr("cpu:0")) << output;
  EXPECT_THAT(output, HasSubstr("cuda: not available: ")) << output;
  EXPECT_THAT(output, HasSubstr("NVIDIA driver")) << output;
  EXPECT_THAT(output, HasSubstr("default training device: cpu:0 (auto: ")) << output;
  EXPECT_THAT(output, HasSubstr("exit=0")) << output;
}
#endif  // NIMBUS_CLI: a GPU-only build (cmake/NimbusGpuOnly.cmake) has no CLI to run

TEST(CudaBuild, TheLibraryDoesNotLinkTheDriver) {
  const std::string needed = testing::run_command(std::string("readelf -d ") + NIMBUS_LIBRARY + " | grep NEEDED");
  EXPECT_THAT(needed, HasSubstr("libcudart.so")) << needed;
  EXPECT_THAT(needed, ::testing::Not(HasSubstr("libcuda.so"))) << needed;
  // Loaded on first use (src/device/cuda/lazy_libraries.h): linking them costs every process seconds.
  EXPECT_THAT(needed, ::testing::Not(HasSubstr("libcublasLt.so"))) << needed;
  EXPECT_THAT(needed, ::testing::Not(HasSubstr("libnvrtc.so"))) << needed;
  // cuDNN too: a machine without it (a separate download) still starts nimbus.
  EXPECT_THAT(needed, ::testing::Not(HasSubstr("libcudnn"))) << needed;
}

}  // namespace
}  // namespace nimbus
