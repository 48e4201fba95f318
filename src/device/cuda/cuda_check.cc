#include "src/device/cuda/cuda_check.h"

#include <fmt/format.h>

#include <string>

#include "nimbus/base/error.h"
#include "src/device/cuda/lazy_libraries.h"

namespace nimbus::cuda {
namespace {

std::string where(const char* library, const char* error, CallSite site) {
  return fmt::format("{} call {} failed with {} ({}:{})", library, site.call, error, site.file, site.line);
}

}  // namespace

const char* cuda_error_hint(cudaError_t status) {
  switch (status) {
    case cudaErrorInsufficientDriver:
      return "no NVIDIA driver new enough for this CUDA runtime: install the driver (nvidia-smi should list the GPU) "
             "or run on the CPU (runtime.device: cpu)";
    case cudaErrorNoDevice:
      return "the driver sees no GPU: check nvidia-smi and CUDA_VISIBLE_DEVICES, or run on the CPU "
             "(runtime.device: cpu)";
    case cudaErrorInvalidDevice:
      return "the device index is beyond the GPUs this process sees (nimbus info lists them)";
    case cudaErrorMemoryAllocation:
      return "the GPU is out of memory: lower fit.batch_size, use gradient accumulation, or set runtime.memory.limit";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return "this build has no code for the GPU's architecture: rebuild with -DNIMBUS_CUDA_ARCHS including its "
             "compute capability, or update the driver so it can compile the PTX";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
      return "a kernel faulted; kernels run asynchronously, so rerun with NIMBUS_CUDA_SYNC=1 to name the op that "
             "launched it";
    default: return "";
  }
}

void throw_cuda_error(cudaError_t status, CallSite site) {
  std::string message = where("CUDA", cudaGetErrorName(status), site) + ": " + cudaGetErrorString(status);
  const std::string hint = cuda_error_hint(status);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clears the error so the next call does not report it again
    throw OutOfMemory(std::move(message), hint);
  }
  if (status == cudaErrorInsufficientDriver || status == cudaErrorNoDevice || status == cudaErrorInvalidDevice) {
    throw Unavailable(std::move(message), hint);
  }
  throw InternalError(std::move(message), hint);
}

void throw_cublas_error(cublasStatus_t status, CallSite site) {
  const char* hint = status == CUBLAS_STATUS_NOT_SUPPORTED
                         ? "cuBLASLt has no algorithm for this shape, dtype and epilogue: the op falls back to our "
                           "kernels only if it says so; report the shape"
                     : status == CUBLAS_STATUS_ALLOC_FAILED ? "the GPU is out of memory for cuBLAS's workspace"
                                                            : "";
  throw InternalError(where("cuBLAS", cublaslt().cublasLtGetStatusName(status), site) + ": " +
                          cublaslt().cublasLtGetStatusString(status),
                      hint);
}

void throw_cudnn_error(cudnnStatus_t status, CallSite site) {
  const char* hint = status == CUDNN_STATUS_NOT_SUPPORTED
                         ? "cuDNN has no engine for this layout, dtype and shape (NHWC with channels a multiple of 8 "
                           "is the fast path)"
                         : "set CUDNN_LOGERR_DBG=1 and CUDNN_LOGDEST_DBG=stderr for cuDNN's own explanation";
  throw InternalError(where("cuDNN", cudnn().cudnnGetErrorString(status), site), hint);
}

void throw_nvrtc_error(nvrtcResult status, CallSite site) {
  throw InternalError(where("NVRTC", nvrtc().nvrtcGetErrorString(status), site),
                      "NVRTC compiles the fused elementwise kernels: runtime.jit: false runs without them");
}

}  // namespace nimbus::cuda
