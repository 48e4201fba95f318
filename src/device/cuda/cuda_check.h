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

// Each library's check: a status other than `ok` throws, naming the call, file and line.
#define NIMBUS_LIBRARY_CHECK(status_type, ok, thrower, call)                          \
  do {                                                                                \
    if (const status_type nimbus_status = (call); nimbus_status != (ok)) [[unlikely]] \
      ::nimbus::cuda::thrower(nimbus_status, {#call, __FILE__, __LINE__});            \
  } while (false)
#define NIMBUS_CUDA_CHECK(call) NIMBUS_LIBRARY_CHECK(cudaError_t, cudaSuccess, throw_cuda_error, call)
#define NIMBUS_CUBLAS_CHECK(call) NIMBUS_LIBRARY_CHECK(cublasStatus_t, CUBLAS_STATUS_SUCCESS, throw_cublas_error, call)
#define NIMBUS_CUDNN_CHECK(call) NIMBUS_LIBRARY_CHECK(cudnnStatus_t, CUDNN_STATUS_SUCCESS, throw_cudnn_error, call)
#define NIMBUS_NVRTC_CHECK(call) NIMBUS_LIBRARY_CHECK(nvrtcResult, NVRTC_SUCCESS, throw_nvrtc_error, call)
