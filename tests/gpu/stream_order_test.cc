// Stream-ordered frees of the BFC allocator on real CUDA streams and events (cudaEventRecord /
// cudaEventQuery): a block freed on the compute stream while a copy there still reads it is reused at
// once by the compute stream, and the copy stream does not write it before the read has run. The
// compute stream is held by a host function that returns when the test says (gpu/stream_gate.h), so
// its events stay incomplete exactly as long as the test needs. tests/memory/stream_order_test.cc
// checks the same contract without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "gpu/stream_gate.h"
#include "nimbus/device/backend.h"
#include "nimbus/device/bfc_allocator.h"
#include "nimbus/device/cuda/cuda_sub_allocator.h"
#include "src/device/cuda/cuda_stream.h"

namespace nimbus::cuda {
namespace {

constexpr size_t MiB = 1024 * 1024;

bool disjoint(void* a, void* b, size_t bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x + bytes <= y || y + bytes <= x;
}

std::vector<uint8_t> read_back(const void* device, size_t bytes) {
  std::vector<uint8_t> host(bytes);
  EXPECT_EQ(cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

// Enqueues a read of `source` (a copy into `target`) on `compute`.
void queue_read(CudaStream& compute, void* target, const void* source, size_t bytes) {
  ASSERT_EQ(cudaMemcpyAsync(target, source, bytes, cudaMemcpyDeviceToDevice, compute.handle()), cudaSuccess);
}

TEST(CudaStreamOrder, AnotherStreamNeverWritesABlockBeforeTheFreeingStreamHasReadIt) {
  // Real CUDA streams and events need a GPU; the `gpu` label runs this where one is lent.
  if (!has_backend(DeviceType::kCUDA)) GTEST_SKIP() << "no CUDA device: real streams and events need a GPU";
  BfcAllocator allocator("cuda:0", make_cuda_sub_allocator(0));
  CudaStream compute(0), copy(0);
  void* p = allocator.allocate(MiB, compute);
  void* target = allocator.allocate(MiB, compute);
  ASSERT_EQ(cudaMemset(p, 0x5A, MiB), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the streams are non-blocking: they do not wait for it
  {
    StreamGate gate(compute);
    queue_read(compute, target, p, MiB);
    allocator.deallocate_on(p, MiB, compute);
    EXPECT_EQ(allocator.allocate(MiB, compute), p) << "the compute stream reuses its own free at once";
    allocator.deallocate_on(p, MiB, compute);
    void* q = allocator.allocate(MiB, copy);
    EXPECT_TRUE(disjoint(p, q, MiB)) << "the copy stream got the block the compute stream still reads";
    ASSERT_EQ(cudaMemsetAsync(q, 0, MiB, copy.handle()), cudaSuccess);
    copy.synchronize();  // the copy stream is not held: its write is done, the compute stream's read not yet
    allocator.deallocate(q, MiB);
    gate.open();
    compute.synchronize();
  }
  EXPECT_EQ(read_back(target, MiB), std::vector<uint8_t>(MiB, 0x5A)) << "the read saw another stream's write";
  EXPECT_EQ(allocator.allocate(MiB, copy), p) << "once its event completed, the block is free for every stream";
  allocator.deallocate(p, MiB);
  allocator.deallocate(target, MiB);
  allocator.check_consistency();
  EXPECT_EQ(allocator.stats().bytes_in_use, 0u);
}

TEST(CudaStreamOrder, PlainFreesOnTheDefaultStreamHoldBackAnotherStreamOnTheDevice) {
  // Real CUDA streams and events need a GPU; the `gpu` label runs this where one is lent.
  if (!has_backend(DeviceType::kCUDA)) GTEST_SKIP() << "no CUDA device: real streams and events need a GPU";
  BfcAllocator allocator("cuda:0", make_cuda_sub_allocator(0));
  CudaStream compute(0), copy(0);
  allocator.set_default_stream(&compute);
  void* p = allocator.allocate(MiB);
  void* target = allocator.allocate(MiB);
  ASSERT_EQ(cudaMemset(p, 0x5A, MiB), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the streams are non-blocking: they do not wait for it
  {
    StreamGate gate(compute);
    queue_read(compute, target, p, MiB);
    allocator.deallocate(p, MiB);  // a plain free: on the compute stream, no event of its own
    void* q = allocator.allocate(MiB, copy);
    EXPECT_EQ(q, p) << "a plain free goes back to the free chunks at once";
    ASSERT_EQ(cudaMemsetAsync(q, 0, MiB, copy.handle()), cudaSuccess);
    EXPECT_EQ(cudaStreamQuery(copy.handle()), cudaErrorNotReady) << "the copy stream did not wait for compute";
    gate.open();
    compute.synchronize();
    copy.synchronize();
    allocator.deallocate(q, MiB);
  }
  EXPECT_EQ(read_back(target, MiB), std::vector<uint8_t>(MiB, 0x5A)) << "the read saw another stream's write";
  allocator.deallocate(target, MiB);
  allocator.check_consistency();
  EXPECT_EQ(allocator.stats().bytes_in_use, 0u);
}

}  // namespace
}  // namespace nimbus::cuda
