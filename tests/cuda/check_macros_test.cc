// The check macros name the failing call, its file and line, the library's
// error and a hint; they pick the error kind from the status. These calls fail
// the same way with or without a GPU, so they run everywhere.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nimbus/base/error.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/lazy_libraries.h"

namespace nimbus::cuda {
namespace {

using ::testing::HasSubstr;

TEST(CudaCheck, ARuntimeErrorNamesTheCallFileLineAndHint) {
  // Device -1 never exists: without a driver the runtime says so, with one the index is invalid.
  const int line = __LINE__ + 2;
  try {
    NIMBUS_CUDA_CHECK(cudaSetDevice(-1));
    FAIL() << "cudaSetDevice(-1) succeeded";
  } catch (const Unavailable& e) {
    EXPECT_THAT(e.message(), HasSubstr("CUDA call cudaSetDevice(-1) failed with cudaError"));
    EXPECT_THAT(e.message(), HasSubstr(fmt::format("check_macros_test.cc:{}", line)));
    EXPECT_FALSE(e.hint().empty());
  }
}

TEST(CudaCheck, AnOutOfMemoryStatusIsOutOfMemoryWithARemedy) {
  try {
    NIMBUS_CUDA_CHECK(cudaErrorMemoryAllocation);
    FAIL() << "no throw";
  } catch (const OutOfMemory& e) {
    EXPECT_THAT(e.message(), HasSubstr("cudaErrorMemoryAllocation"));
    EXPECT_THAT(e.hint(), HasSubstr("fit.batch_size"));
  }
}

TEST(CudaCheck, AKernelFaultSuggestsSynchronousMode) {
  try {
    NIMBUS_CUDA_CHECK(cudaErrorIllegalAddress);
    FAIL() << "no throw";
  } catch (const InternalError& e) {
    EXPECT_THAT(e.message(), HasSubstr("cudaErrorIllegalAddress"));
    EXPECT_THAT(e.hint(), HasSubstr("NIMBUS_CUDA_SYNC=1"));
  }
}

TEST(CudaCheck, NvrtcCublasAndCudnnErrorsNameTheirLibrary) {
  EXPECT_THAT(
      [] { NIMBUS_NVRTC_CHECK(nvrtcCompileProgram(nullptr, 0, nullptr)); },
      ::testing::ThrowsMessage<InternalError>(HasSubstr("NVRTC call nvrtcCompileProgram(nullptr, 0, nullptr)")));
  EXPECT_THAT([] { NIMBUS_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED); },
              ::testing::ThrowsMessage<InternalError>(HasSubstr("cuBLAS call CUBLAS_STATUS_NOT_SUPPORTED failed with "
                                                                "CUBLAS_STATUS_NOT_SUPPORTED")));
  EXPECT_THAT(
      [] { NIMBUS_CUDNN_CHECK(cudnn().cudnnCreateTensorDescriptor(nullptr)); },
      ::testing::ThrowsMessage<InternalError>(HasSubstr("cuDNN call cudnn().cudnnCreateTensorDescriptor(nullptr)")));
}

TEST(CudaCheck, SuccessThrowsNothing) {
  int version = 0;
  EXPECT_NO_THROW(NIMBUS_CUDA_CHECK(cudaRuntimeGetVersion(&version)));
  EXPECT_GE(version, 12000);
}

}  // namespace
}  // namespace nimbus::cuda
