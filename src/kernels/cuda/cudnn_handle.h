// What every cuDNN kernel (cudnn_convolution.cc, cudnn_pooling.cc,
// cudnn_batch_norm.cc) shares: a handle per device and stream, already set to
// that stream; descriptors that destroy themselves; cuDNN's names for our
// dtypes; and scratch memory from the device's BFC allocator.
//
//   cudnnHandle_t handle = cudnn_handle(stream);
//   TensorDescriptor x(problem.x, problem.dtype, problem.channels_last);
//   Scratch workspace(stream, bytes);   // freed after the enqueue: every later user runs on the same stream
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <functional>
#include <vector>

#include "nimbus/base/dtype.h"
#include "nimbus/ops/op_schema.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/cuda_stream.h"
#include "src/device/cuda/lazy_libraries.h"
#include "src/kernels/cuda/cudnn_problem.h"

namespace nimbus::cuda {

// The handle for `stream`'s device, bound to `stream` (made on first use, kept for the process's life).
cudnnHandle_t cudnn_handle(CudaStream& stream);

// A cuDNN kernel's registration: name "cudnn", priority 2, above the direct kernels (priority 1) that
// serve the calls `supports` turns away.
KernelDef cudnn_kernel(std::vector<DType> dtypes, KernelFn fn, std::function<bool(const KernelContext&)> supports);

// cuDNN's alpha and beta for f32, bf16 and f16 data: y = 1 * result + 0 * y (with beta 0, y is never read).
inline constexpr float kOne = 1.0f, kZero = 0.0f;

// CUDNN_DATA_FLOAT, _HALF or _BFLOAT16.
cudnnDataType_t cudnn_type(DType dtype);

// Owns one cuDNN descriptor, made by the API's `Create` and destroyed by its `Destroy` (members of CudnnApi).
template <typename Handle, auto Create, auto Destroy>
class Descriptor {
 public:
  Descriptor() { NIMBUS_CUDNN_CHECK((cudnn().*Create)(&descriptor_)); }
  ~Descriptor() { (cudnn().*Destroy)(descriptor_); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Handle get() const { return descriptor_; }

 private:
  Handle descriptor_ = nullptr;
};

// An image batch (n, c, h, w stored NHWC or NCHW).
struct TensorDescriptor : Descriptor<cudnnTensorDescriptor_t, &CudnnApi::cudnnCreateTensorDescriptor,
                                     &CudnnApi::cudnnDestroyTensorDescriptor> {
  TensorDescriptor(const Dims4& nchw, DType dtype, bool channels_last);
};

// A filter (k, c / groups, r, s), stored KRSC (channels_last) or KCRS.
struct FilterDescriptor : Descriptor<cudnnFilterDescriptor_t, &CudnnApi::cudnnCreateFilterDescriptor,
                                     &CudnnApi::cudnnDestroyFilterDescriptor> {
  FilterDescriptor(const Dims4& kcrs, DType dtype, bool channels_last);
};

// A device buffer from the BFC allocator for one enqueue (a workspace, a transposed filter).
class Scratch {
 public:
  Scratch(CudaStream& stream, size_t bytes);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  int device_;
  size_t bytes_;
  void* data_ = nullptr;
};

}  // namespace nimbus::cuda
