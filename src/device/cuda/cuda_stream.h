// CUDA streams and events behind the Stream and Event interfaces
// (nimbus/device/stream.h). Each device has a compute stream, where every
// kernel runs, and a copy stream for host-to-device copies of input batches,
// which overlap the compute stream's work; events order one after the other.
//
//   CudaStream& s = cuda_stream(ctx.stream);   // a kernel's stream
//   my_kernel<<<blocks, threads, 0, s.handle()>>>(...);
//   NIMBUS_CUDA_CHECK_LAUNCH("my_kernel", s);   // launch errors; with NIMBUS_CUDA_SYNC=1, faults too
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "nimbus/device/stream.h"
#include "src/device/cuda/cuda_check.h"

namespace nimbus::cuda {

class CudaEvent final : public Event {
 public:
  // An event on `device`, without timing (cheaper to record and wait on).
  explicit CudaEvent(int device);
  ~CudaEvent() override;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  bool query() const override;
  void synchronize() const override;
  cudaEvent_t handle() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

class CudaStream final : public Stream {
 public:
  // A non-blocking stream on `device`: it does not wait for the legacy default stream.
  explicit CudaStream(int device);
  ~CudaStream() override;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  Device device() const override { return Device::cuda(device_); }
  void synchronize() override;
  std::shared_ptr<Event> record() override;
  void wait(const Event& event) override;
  cudaStream_t handle() const { return stream_; }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
};

// The CUDA stream behind a Stream that must be one (a kernel's context stream).
CudaStream& cuda_stream(Stream& stream);

// After a kernel launch: throws naming the kernel (site.call) if the launch failed, and
// when NIMBUS_CUDA_SYNC=1 synchronizes so that a fault names the kernel that caused it.
void check_launch(CallSite site, CudaStream& stream);
// The device's streaming multiprocessors (read once per device): launches size their grids by it.
int multiprocessor_count(int device);

// NIMBUS_CUDA_SYNC=1 (read once).
bool sync_after_every_kernel();

}  // namespace nimbus::cuda

#define NIMBUS_CUDA_CHECK_LAUNCH(kernel, stream) ::nimbus::cuda::check_launch({kernel, __FILE__, __LINE__}, stream)
