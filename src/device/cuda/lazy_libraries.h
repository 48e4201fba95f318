// cuBLASLt, NVRTC and cuDNN, loaded on first use with dlopen rather than linked:
// loading libcublasLt (540 MB) costs every process about 3.5 s of start-up and
// libnvrtc 0.4 s, which every test and `nimbus` run would pay, GPU or not; and a
// machine without cuDNN (it is a separate download) must still start `nimbus`.
//
//   NIMBUS_CUBLAS_CHECK(cublaslt().cublasLtCreate(&handle));
//   NIMBUS_NVRTC_CHECK(nvrtc().nvrtcCompileProgram(program, n, options));
//   NIMBUS_CUDNN_CHECK(cudnn().cudnnCreate(&handle));
//
// A library that cannot be loaded throws Unavailable naming it and what to do.
#pragma once

#include <cublasLt.h>
#include <cudnn.h>
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
#define NIMBUS_CUDNN_FUNCTIONS(X) \
  X(cudnnActivationForward) \
  X(cudnnAddTensor) \
  X(cudnnBatchNormalizationBackward) \
  X(cudnnBatchNormalizationForwardInference) \
  X(cudnnBatchNormalizationForwardTraining) \
  X(cudnnConvolutionBackwardData) \
  X(cudnnConvolutionBackwardFilter) \
  X(cudnnConvolutionBiasActivationForward) \
  X(cudnnConvolutionForward) \
  X(cudnnCreate) \
  X(cudnnCreateActivationDescriptor) \
  X(cudnnCreateConvolutionDescriptor) \
  X(cudnnCreateFilterDescriptor) \
  X(cudnnCreatePoolingDescriptor) \
  X(cudnnCreateTensorDescriptor) \
  X(cudnnDestroyActivationDescriptor) \
  X(cudnnDestroyConvolutionDescriptor) \
  X(cudnnDestroyFilterDescriptor) \
  X(cudnnDestroyPoolingDescriptor) \
  X(cudnnDestroyTensorDescriptor) \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7) \
  X(cudnnGetConvolutionBackwardDataAlgorithmMaxCount) \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7) \
  X(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount) \
  X(cudnnGetConvolutionForwardAlgorithm_v7) \
  X(cudnnGetConvolutionForwardAlgorithmMaxCount) \
  X(cudnnGetErrorString) \
  X(cudnnGetVersion) \
  X(cudnnPoolingBackward) \
  X(cudnnPoolingForward) \
  X(cudnnSetActivationDescriptor) \
  X(cudnnSetConvolution2dDescriptor) \
  X(cudnnSetConvolutionGroupCount) \
  X(cudnnSetConvolutionMathType) \
  X(cudnnSetFilter4dDescriptor) \
  X(cudnnSetPooling2dDescriptor) \
  X(cudnnSetStream) \
  X(cudnnSetTensor4dDescriptor)
// clang-format on

// `name` is a declarator here and cannot take parentheses.
#define NIMBUS_FUNCTION_POINTER(name) decltype(&::name) name = nullptr;  // NOLINT(bugprone-macro-parentheses)
struct CublasLtApi {
  NIMBUS_CUBLASLT_FUNCTIONS(NIMBUS_FUNCTION_POINTER)
};
struct NvrtcApi {
  NIMBUS_NVRTC_FUNCTIONS(NIMBUS_FUNCTION_POINTER)
};
struct CudnnApi {
  NIMBUS_CUDNN_FUNCTIONS(NIMBUS_FUNCTION_POINTER)
};
#undef NIMBUS_FUNCTION_POINTER

const CublasLtApi& cublaslt();
const NvrtcApi& nvrtc();
// libcudnn.so.9 (the toolkit's, pip's nvidia-cudnn-cu13, or the folder this build found it in).
const CudnnApi& cudnn();

}  // namespace nimbus::cuda
