// The CUDA backend: one BFC allocator over cudaMalloc, one compute stream and
// one copy stream per device, made on first use. Every kernel runs on the
// compute stream, the allocator's default stream, so a block the allocator
// frees can serve the next allocation at once: any later kernel that writes
// it is queued behind the kernels that read it (stream-ordered reuse, as
// PyTorch's caching allocator). Memory the copy stream writes is allocated on
// that stream (allocate(bytes, stream)), which then waits for the compute
// stream's frees before its first write (bfc_allocator.h).
//
// With no driver or no GPU the backend registers anyway with no devices, and
// unavailable_reason() says which (no driver library, the driver's error, no GPU), so `backend(DeviceType::kCUDA)`
// throws Unavailable naming what is missing instead of the process failing to start.
#include "src/device/cuda/cuda_backend.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <memory>
#include <mutex>
#include <vector>

#include "nimbus/base/error.h"
#include "nimbus/device/backend.h"
#include "nimbus/device/bfc_allocator.h"
#include "nimbus/device/cuda/cuda_sub_allocator.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/cuda_stream.h"

namespace nimbus::cuda {
namespace {

struct DeviceState {
  explicit DeviceState(int index)
      : allocator(Device::cuda(index).to_string(), make_cuda_sub_allocator(index), apply_memory_environment({})),
        compute(index),
        copy(index) {
    allocator.set_default_stream(&compute);
  }
  BfcAllocator allocator;
  CudaStream compute;
  CudaStream copy;
};

// Why cudaGetDeviceCount failed: no driver at all (libcuda.so.1, which the runtime loads, is not
// there), or the driver's own error.
std::string why_no_device_count(cudaError_t status) {
  const std::string call =
      fmt::format("cudaGetDeviceCount returned {} ({})", cudaGetErrorName(status), cudaGetErrorString(status));
  if (void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    dlclose(driver);
    const std::string hint = cuda_error_hint(status);
    return fmt::format("the NVIDIA driver failed: {}{}", call, hint.empty() ? "" : "; " + hint);
  }
  const char* missing = dlerror();
  return fmt::format("no NVIDIA driver: {} ({})", missing ? missing : "libcuda.so.1 cannot be loaded", call);
}

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      reason_ = why_no_device_count(status);
      count = 0;
    } else if (count == 0) {
      reason_ = "the NVIDIA driver reports no GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES)";
    }
    devices_.resize(static_cast<size_t>(count));
  }

  DeviceType type() const override { return DeviceType::kCUDA; }
  int device_count() const override { return static_cast<int>(devices_.size()); }
  std::string unavailable_reason() const override { return reason_; }

  std::string describe(int index) const override {
    cudaDeviceProp prop{};
    NIMBUS_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    NIMBUS_CUDA_CHECK(cudaSetDevice(index));
    size_t free = 0, total = 0;
    NIMBUS_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    int runtime = 0, driver = 0;
    NIMBUS_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    NIMBUS_CUDA_CHECK(cudaDriverGetVersion(&driver));
    return fmt::format(
        "cuda:{}: {}, compute capability {}.{}, {} SMs, {:.1f} of {:.1f} GiB free, CUDA runtime {}.{}, "
        "driver {}.{}",
        index, prop.name, prop.major, prop.minor, prop.multiProcessorCount, free / double(1 << 30),
        total / double(1 << 30), runtime / 1000, runtime % 1000 / 10, driver / 1000, driver % 1000 / 10);
  }

  std::string device_name(int index) const override {
    cudaDeviceProp prop{};
    NIMBUS_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    return prop.name;
  }

  Allocator& allocator(int index) override { return state(index).allocator; }
  Stream& default_stream(int index) override { return state(index).compute; }
  CudaStream& copy_stream(int index) { return state(index).copy; }
  BfcAllocator& device_allocator(int index) { return state(index).allocator; }

  // Host-to-device and device-to-device copies stay asynchronous on `stream`; a copy to
  // the host waits for it, since the host reads the bytes as soon as this returns.
  void copy(const void* src, Device src_device, void* dst, Device dst_device, size_t bytes, Stream& stream) override {
    if (bytes == 0) return;
    CudaStream& cuda = cuda_stream(stream);
    NIMBUS_CUDA_CHECK(cudaSetDevice(cuda.device().index));
    NIMBUS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cuda.handle()));
    if (dst_device.is_cpu()) cuda.synchronize();
  }

 private:
  DeviceState& state(int index) {
    NIMBUS_ASSERT(index >= 0 && index < device_count()) << "cuda:" << index << " does not exist";
    std::lock_guard lock(mutex_);
    auto& slot = devices_[static_cast<size_t>(index)];
    if (slot == nullptr) slot = std::make_unique<DeviceState>(index);
    return *slot;
  }

  std::string reason_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<DeviceState>> devices_;
};

// Registered when the library loads; counting devices does not need a GPU.
CudaBackend& cuda_backend() {
  static CudaBackend* const instance = [] {
    auto owned = std::make_unique<CudaBackend>();
    CudaBackend* raw = owned.get();
    register_backend(std::move(owned));
    return raw;
  }();
  return *instance;
}
const bool kRegistered = (cuda_backend(), true);

}  // namespace

CudaStream& copy_stream(int device) {
  backend(DeviceType::kCUDA);  // Unavailable, saying why, without a GPU
  return cuda_backend().copy_stream(device);
}

BfcAllocator& device_allocator(int device) {
  backend(DeviceType::kCUDA);
  return cuda_backend().device_allocator(device);
}

}  // namespace nimbus::cuda
