// Check macros for every call into CUDA and its libraries. A failed call
// throws with the call's text, the file and line, the library's error name
// and a hint saying what to do:
//
//   NIMBUS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
//   NIMBUS_CUBLAS_CHECK(cublasLtMatmul(...));
//   NIMBUS_CUDNN_CHECK(cudnnConvolutionForward(...));
//   NIMBUS_NVRTC_CHECK(nvrtcCompileProgram(program, n, options));
//
// A missing driver or device throws Unavailable, an allocation OutOfMemory,
// anything else InternalError. With NIMBUS_CUDA_SYNC=1 the backend
// synchronizes after every kernel, so an asynchronous fault names its op.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nvrtc.h>

namespace nimbus::cuda {

// Where a checked call is and what it was.
struct CallSite {
  const char* call;
  const char* file;
  int line;
};

[[noreturn]] void throw_cuda_error(cudaError_t status, CallSite site);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, CallSite site);
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, CallSite site);
[[noreturn]] void throw_nvrtc_error(nvrtcResult status, CallSite site);

// What to do about a CUDA runtime error (empty when nothing specific helps).
const char* cuda_error_hint(cudaError_t status);

}  // namespace nimbus::cuda

#define NIMBUS_CUDA_CHECK(call)                                                              \
  do {                                                                                       \
    if (const cudaError_t nimbus_status = (call); nimbus_status != cudaSuccess) [[unlikely]] \
      ::nimbus::cuda::throw_cuda_error(nimbus_status, {#call, __FILE__, __LINE__});          \
  } while (false)
#define NIMBUS_CUBLAS_CHECK(call)                                                                         \
  do {                                                                                                    \
    if (const cublasStatus_t nimbus_status = (call); nimbus_status != CUBLAS_STATUS_SUCCESS) [[unlikely]] \
      ::nimbus::cuda::throw_cublas_error(nimbus_status, {#call, __FILE__, __LINE__});                     \
  } while (false)
#define NIMBUS_CUDNN_CHECK(call)                                                                        \
  do {                                                                                                  \
    if (const cudnnStatus_t nimbus_status = (call); nimbus_status != CUDNN_STATUS_SUCCESS) [[unlikely]] \
      ::nimbus::cuda::throw_cudnn_error(nimbus_status, {#call, __FILE__, __LINE__});                    \
  } while (false)
#define NIMBUS_NVRTC_CHECK(call)                                                               \
  do {                                                                                         \
    if (const nvrtcResult nimbus_status = (call); nimbus_status != NVRTC_SUCCESS) [[unlikely]] \
      ::nimbus::cuda::throw_nvrtc_error(nimbus_status, {#call, __FILE__, __LINE__});           \
  } while (false)
