// cuBLASLt and NVRTC, loaded on first use with dlopen rather than linked:
// loading libcublasLt (540 MB) costs every process about 3.5 s of start-up and
// libnvrtc 0.4 s, which every test and `nimbus` run would pay, GPU or not.
//
//   NIMBUS_CUBLAS_CHECK(cublaslt().cublasLtCreate(&handle));
//   NIMBUS_NVRTC_CHECK(nvrtc().nvrtcCompileProgram(program, n, options));
//
// A library that cannot be loaded throws Unavailable naming it and what to do.
#pragma once

#include <cublasLt.h>
#include <nvrtc.h>

namespace nimbus::cuda {

// One X(function) per line (clang-format would reflow these lists differently on every run).
// clang-format off
#define NIMBUS_CUBLASLT_FUNCTIONS(X) \
  X(cublasLtCreate) \
  X(cublasLtGetStatusName) \
  X(cublasLtGetStatusString) \
  X(cublasLtMatmul) \
  X(cublasLtMatmulAlgoGetHeuristic) \
  X(cublasLtMatmulDescCreate) \
  X(cublasLtMatmulDescDestroy) \
  X(cublasLtMatmulDescSetAttribute) \
  X(cublasLtMatmulPreferenceCreate) \
  X(cublasLtMatmulPreferenceDestroy) \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatrixLayoutCreate) \
  X(cublasLtMatrixLayoutDestroy) \
  X(cublasLtMatrixLayoutSetAttribute)
#define NIMBUS_NVRTC_FUNCTIONS(X) \
  X(nvrtcCreateProgram) \
  X(nvrtcCompileProgram) \
  X(nvrtcDestroyProgram) \
  X(nvrtcGetCUBIN) \
  X(nvrtcGetCUBINSize) \
  X(nvrtcGetErrorString) \
  X(nvrtcGetNumSupportedArchs) \
  X(nvrtcGetPTX) \
  X(nvrtcGetPTXSize) \
  X(nvrtcGetProgramLog) \
  X(nvrtcGetProgramLogSize) \
  X(nvrtcGetSupportedArchs)
// clang-format on

#define NIMBUS_FUNCTION_POINTER(name) decltype(&::name) name = nullptr;
struct CublasLtApi {
  NIMBUS_CUBLASLT_FUNCTIONS(NIMBUS_FUNCTION_POINTER)
};
struct NvrtcApi {
  NIMBUS_NVRTC_FUNCTIONS(NIMBUS_FUNCTION_POINTER)
};
#undef NIMBUS_FUNCTION_POINTER

const CublasLtApi& cublaslt();
const NvrtcApi& nvrtc();

}  // namespace nimbus::cuda
