// Double-buffered uploads of input batches: each upload arrives intact on the
// device while the previous batch's tensor still holds its own values, and the
// copy of batch N+1 runs while a step still reads batch N (fit's look-ahead,
// src/train/device_batches.h) without overwriting it.
#include "src/tensor/cuda/batch_uploader.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "gpu/stream_gate.h"
#include "nimbus/device/backend.h"
#include "nimbus/nimbus.h"
#include "src/device/cuda/cuda_backend.h"

namespace nimbus::cuda {
namespace {

TEST(BatchUploader, BatchesArriveIntactAndTheLastTwoStayValid) {
  // Pinned buffers and device copies need a GPU; the `gpu` label runs this where one is lent.
  if (!has_backend(DeviceType::kCUDA)) GTEST_SKIP() << "no CUDA device: the uploader copies to a GPU";
  BatchUploader uploader(0);
  std::vector<Tensor> host, device;
  for (int i = 0; i < 5; ++i) {
    host.push_back(random_normal({64, 784}));
    device.push_back(uploader.upload(host.back()));
    if (i >= 1) {  // the previous batch is still valid: its buffer is reused only by the next upload
      EXPECT_EQ(device[i - 1].to(Device::cpu()).to_vector<float>(), host[i - 1].to_vector<float>());
    }
    EXPECT_EQ(device[i].to(Device::cpu()).to_vector<float>(), host[i].to_vector<float>());
  }
}

TEST(BatchUploader, TheNextBatchsCopyOverlapsTheStepThatReadsThisOne) {
  // The copy stream and the compute stream run side by side only on a GPU; the `gpu` label runs this where one
  // is lent.
  if (!has_backend(DeviceType::kCUDA)) GTEST_SKIP() << "no CUDA device: the copy and compute streams need a GPU";
  CudaStream& compute = cuda_stream(default_stream_for(Device::cuda(0)));
  CudaStream& copy = copy_stream(0);
  BatchUploader uploader(0);
  std::vector<Tensor> host;
  for (int i = 0; i < 5; ++i) host.push_back(random_normal({256, 1024}));
  const size_t bytes = host[0].nbytes();
  // Two warm-up batches give both slots their buffers: what follows is the steady state, with no allocation.
  (void)uploader.upload(host[0]);
  (void)uploader.upload(host[1]);
  const Tensor batch_n = uploader.upload(host[2]);
  compute.synchronize();
  void* step_read = nullptr;
  ASSERT_EQ(cudaMalloc(&step_read, bytes), cudaSuccess);
  Tensor batch_after, batch_after_next;
  bool watchdog_opened = false;
  {
    // Step N: a read of batch N on the compute stream, held by the gate as if the step were still running.
    StreamGate gate(compute);
    ASSERT_EQ(cudaMemcpyAsync(step_read, batch_n.raw_data(), bytes, cudaMemcpyDeviceToDevice, compute.handle()),
              cudaSuccess);
    // Should an upload wait for the step on the host (or its copy for the step), the gate opens after a while
    // rather than hang, and the checks below fail.
    std::atomic<bool> done{false};
    std::thread watchdog([&] {
      for (int i = 0; i < 300 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!done) {
        watchdog_opened = true;
        gate.open();
      }
    });
    batch_after = uploader.upload(host[3]);  // the look-ahead: the host goes on while step N runs
    copy.synchronize();
    EXPECT_EQ(cudaStreamQuery(compute.handle()), cudaErrorNotReady) << "batch N+1's copy waited for step N";
    batch_after_next = uploader.upload(host[4]);  // batch N's slot: its copy must wait for step N
    EXPECT_EQ(cudaStreamQuery(copy.handle()), cudaErrorNotReady) << "batch N+2 was copied over batch N during step N";
    done = true;
    gate.open();
    watchdog.join();
  }
  EXPECT_FALSE(watchdog_opened) << "an upload waited on the host for the step";
  compute.synchronize();
  copy.synchronize();
  std::vector<float> read(static_cast<size_t>(host[2].numel()));
  ASSERT_EQ(cudaMemcpy(read.data(), step_read, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(read, host[2].to_vector<float>()) << "step N read another batch than N";
  EXPECT_EQ(batch_after.to(Device::cpu()).to_vector<float>(), host[3].to_vector<float>());
  EXPECT_EQ(batch_after_next.to(Device::cpu()).to_vector<float>(), host[4].to_vector<float>());
  ASSERT_EQ(cudaFree(step_read), cudaSuccess);
}

}  // namespace
}  // namespace nimbus::cuda
