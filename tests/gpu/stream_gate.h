// Holds a CUDA stream with a host function that returns when the test says, so that the work
// enqueued after it, and its events, stay incomplete exactly as long as a test needs.
//
//   StreamGate gate(compute);
//   queue_read(compute, ...);   // waits behind the gate
//   ...                         // check what another stream did meanwhile
//   gate.open();
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "src/device/cuda/cuda_stream.h"

namespace nimbus::cuda {

class StreamGate {
 public:
  explicit StreamGate(CudaStream& stream) {
    EXPECT_EQ(cudaLaunchHostFunc(stream.handle(), &StreamGate::hold, &open_), cudaSuccess);
  }
  ~StreamGate() { open(); }
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;
  // Safe from any thread.
  void open() { open_ = true; }

 private:
  static void hold(void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield();
  }
  std::atomic<bool> open_{false};
};

}  // namespace nimbus::cuda
