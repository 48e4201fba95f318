#include "nimbus/device/cuda/cuda_sub_allocator.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "nimbus/base/error.h"

namespace nimbus {

namespace {

void check(cudaError_t status, const char* call, int device) {
  if (status == cudaSuccess) return;
  throw Unavailable(
      fmt::format("cuda:{}: {} failed: {} ({})", device, call, cudaGetErrorName(status), cudaGetErrorString(status)),
      "nvidia-smi shows whether the driver sees the GPU");
}

class CudaSubAllocator final : public SubAllocator {
 public:
  explicit CudaSubAllocator(int device) : device_(device) {}

  std::string name() const override { return fmt::format("cuda:{} memory: cudaMalloc", device_); }

  void* allocate_region(size_t bytes) override {
    check(cudaSetDevice(device_), "cudaSetDevice", device_);
    void* ptr = nullptr;
    const cudaError_t status = cudaMalloc(&ptr, bytes);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clears the sticky error so later calls do not report it
      return nullptr;
    }
    check(status, "cudaMalloc", device_);
    return ptr;
  }

  void free_region(void* ptr, size_t) override {
    check(cudaSetDevice(device_), "cudaSetDevice", device_);
    check(cudaFree(ptr), "cudaFree", device_);
  }

  uint64_t free_memory() const override {
    check(cudaSetDevice(device_), "cudaSetDevice", device_);
    size_t free = 0, total = 0;
    check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo", device_);
    return free;
  }

 private:
  int device_;
};

}  // namespace

std::unique_ptr<SubAllocator> make_cuda_sub_allocator(int device) { return std::make_unique<CudaSubAllocator>(device); }

}  // namespace nimbus
