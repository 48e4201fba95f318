#include "src/kernels/cuda/cudnn_handle.h"

#include <map>
#include <mutex>
#include <utility>

#include "nimbus/device/backend.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/lazy_libraries.h"

namespace nimbus::cuda {

cudnnHandle_t cudnn_handle(CudaStream& stream) {
  static std::mutex mutex;
  static std::map<std::pair<int, cudaStream_t>, cudnnHandle_t> handles;  // kept for the process's life, like streams
  const int device = stream.device().index;
  std::lock_guard lock(mutex);
  auto [slot, added] = handles.try_emplace({device, stream.handle()}, nullptr);
  if (added) {
    NIMBUS_CUDA_CHECK(cudaSetDevice(device));
    NIMBUS_CUDNN_CHECK(cudnn().cudnnCreate(&slot->second));
    NIMBUS_CUDNN_CHECK(cudnn().cudnnSetStream(slot->second, stream.handle()));
  }
  return slot->second;
}

KernelDef cudnn_kernel(std::vector<DType> dtypes, KernelFn fn, std::function<bool(const KernelContext&)> supports) {
  return {.name = "cudnn",
          .device = DeviceType::kCUDA,
          .dtypes = std::move(dtypes),
          .priority = 2,
          .fn = std::move(fn),
          .supports = std::move(supports)};
}

cudnnDataType_t cudnn_type(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return CUDNN_DATA_BFLOAT16;
    case DType::kF16: return CUDNN_DATA_HALF;
    default: return CUDNN_DATA_FLOAT;
  }
}

namespace {
cudnnTensorFormat_t format(bool channels_last) { return channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW; }
int to_int(int64_t value) { return static_cast<int>(value); }  // the geometry keeps image sizes far below 2^31
}  // namespace

TensorDescriptor::TensorDescriptor(const Dims4& nchw, DType dtype, bool channels_last) {
  NIMBUS_CUDNN_CHECK(cudnn().cudnnSetTensor4dDescriptor(get(), format(channels_last), cudnn_type(dtype),
                                                        to_int(nchw[0]), to_int(nchw[1]), to_int(nchw[2]),
                                                        to_int(nchw[3])));
}

FilterDescriptor::FilterDescriptor(const Dims4& kcrs, DType dtype, bool channels_last) {
  NIMBUS_CUDNN_CHECK(cudnn().cudnnSetFilter4dDescriptor(get(), cudnn_type(dtype), format(channels_last),
                                                        to_int(kcrs[0]), to_int(kcrs[1]), to_int(kcrs[2]),
                                                        to_int(kcrs[3])));
}

Scratch::Scratch(CudaStream& stream, size_t bytes) : device_(stream.device().index), bytes_(bytes) {
  if (bytes_ > 0) data_ = backend(DeviceType::kCUDA).allocator(device_).allocate(bytes_);
}
Scratch::~Scratch() {
  if (data_ != nullptr) backend(DeviceType::kCUDA).allocator(device_).deallocate(data_, bytes_);
}

}  // namespace nimbus::cuda
