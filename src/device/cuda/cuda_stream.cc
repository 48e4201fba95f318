#include "src/device/cuda/cuda_stream.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "nimbus/base/error.h"
#include "src/device/cuda/cuda_check.h"

namespace nimbus::cuda {

CudaEvent::CudaEvent(int device) {
  NIMBUS_CUDA_CHECK(cudaSetDevice(device));
  NIMBUS_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
}

CudaEvent::~CudaEvent() { (void)cudaEventDestroy(event_); }

bool CudaEvent::query() const {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) return false;
  NIMBUS_CUDA_CHECK(status);
  return true;
}

void CudaEvent::synchronize() const { NIMBUS_CUDA_CHECK(cudaEventSynchronize(event_)); }

CudaStream::CudaStream(int device) : device_(device) {
  NIMBUS_CUDA_CHECK(cudaSetDevice(device));
  NIMBUS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

CudaStream::~CudaStream() { (void)cudaStreamDestroy(stream_); }

void CudaStream::synchronize() { NIMBUS_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

std::shared_ptr<Event> CudaStream::record() {
  auto event = std::make_shared<CudaEvent>(device_);
  NIMBUS_CUDA_CHECK(cudaEventRecord(event->handle(), stream_));
  return event;
}

void CudaStream::wait(const Event& event) {
  const auto* cuda_event = dynamic_cast<const CudaEvent*>(&event);
  NIMBUS_ASSERT(cuda_event != nullptr) << "a CUDA stream can wait only on CUDA events";
  NIMBUS_CUDA_CHECK(cudaStreamWaitEvent(stream_, cuda_event->handle(), 0));
}

CudaStream& cuda_stream(Stream& stream) {
  auto* cuda = dynamic_cast<CudaStream*>(&stream);
  NIMBUS_ASSERT(cuda != nullptr) << "a CUDA kernel got a stream of " << stream.device().to_string();
  return *cuda;
}

int multiprocessor_count(int device) {
  static std::mutex mutex;
  static std::map<int, int> counts;
  std::lock_guard lock(mutex);
  auto [slot, added] = counts.try_emplace(device, 0);
  if (added) NIMBUS_CUDA_CHECK(cudaDeviceGetAttribute(&slot->second, cudaDevAttrMultiProcessorCount, device));
  return slot->second;
}

bool sync_after_every_kernel() {
  static const bool sync = [] {
    const char* value = std::getenv("NIMBUS_CUDA_SYNC");
    return value != nullptr && std::string(value) == "1";
  }();
  return sync;
}

void check_launch(CallSite site, CudaStream& stream) {
  cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess && sync_after_every_kernel()) status = cudaStreamSynchronize(stream.handle());
  if (status != cudaSuccess) throw_cuda_error(status, site);
}

}  // namespace nimbus::cuda
