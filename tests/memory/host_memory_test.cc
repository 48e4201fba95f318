// Host pipeline memory (device/host_memory.h): CPU tensors made inside a HostMemoryScope come from
// the host allocator, count in host_memory_stats() and not in the CPU device's statistics, and do not
// count against runtime.memory.limit; outside a scope, and on other threads, nothing changes.
#include "nimbus/device/host_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <thread>

#include "nimbus/base/error.h"
#include "nimbus/data/dataset.h"
#include "nimbus/device/memory.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus {
namespace {

constexpr uint64_t MiB = 1024 * 1024;

// Restores the CPU's memory options (no limit) after each test.
class HostMemory : public ::testing::Test {
 protected:
  void TearDown() override { configure_memory(Device::cpu(), {}); }
};

TEST_F(HostMemory, TensorsInAScopeAreHostMemoryAndOthersDeviceMemory) {
  const uint64_t device_before = memory_stats(Device::cpu()).bytes_in_use;
  const uint64_t host_before = host_memory_stats().bytes_in_use;
  std::optional<Tensor> host, device;
  {
    const HostMemoryScope scope;
    EXPECT_TRUE(HostMemoryScope::active());
    host = Tensor::empty(Shape({int64_t{MiB}}), DType::kF32);
  }
  EXPECT_FALSE(HostMemoryScope::active());
  EXPECT_EQ(host_memory_stats().bytes_in_use, host_before + 4 * MiB);
  EXPECT_EQ(memory_stats(Device::cpu()).bytes_in_use, device_before);

  device = Tensor::empty(Shape({int64_t{MiB}}), DType::kF32);
  EXPECT_EQ(memory_stats(Device::cpu()).bytes_in_use, device_before + 4 * MiB);
  EXPECT_EQ(host_memory_stats().bytes_in_use, host_before + 4 * MiB);

  // Each goes back to the allocator it came from, wherever it is freed.
  {
    const HostMemoryScope scope;
    device.reset();
  }
  host.reset();
  EXPECT_EQ(memory_stats(Device::cpu()).bytes_in_use, device_before);
  EXPECT_EQ(host_memory_stats().bytes_in_use, host_before);
  EXPECT_GE(host_memory_stats().peak_bytes_in_use, host_before + 4 * MiB);
}

TEST_F(HostMemory, ScopesNestAndBelongToTheirThread) {
  const HostMemoryScope outer;
  {
    const HostMemoryScope inner;
    EXPECT_TRUE(HostMemoryScope::active());
  }
  EXPECT_TRUE(HostMemoryScope::active()) << "the inner scope's end ended the outer one";
  bool other_thread_active = true;
  uint64_t device_grew = 0;
  std::thread([&] {
    other_thread_active = HostMemoryScope::active();
    const uint64_t before = memory_stats(Device::cpu()).bytes_in_use;
    const Tensor t = Tensor::empty(Shape({1024}), DType::kF32);
    device_grew = memory_stats(Device::cpu()).bytes_in_use - before;
  }).join();
  EXPECT_FALSE(other_thread_active);
  EXPECT_EQ(device_grew, 4096u);
}

// The point of it: a data set larger than the device's limit loads, and the limit still holds for
// the model's tensors.
TEST_F(HostMemory, HostMemoryDoesNotCountAgainstTheDevicesLimit) {
  configure_memory(Device::cpu(), {.limit = memory_stats(Device::cpu()).bytes_reserved + 2 * MiB});
  Tensor data_set;
  {
    const HostMemoryScope scope;
    data_set = Tensor::empty(Shape({int64_t{16 * MiB}}), DType::kF32);  // 64 MiB
  }
  EXPECT_EQ(data_set.nbytes(), 64 * MiB);
  EXPECT_THROW(Tensor::empty(Shape({int64_t{16 * MiB}}), DType::kF32), OutOfMemory);
}

TEST_F(HostMemory, PipelineBuffersAreHostMemoryAlignedLikeTheDevices) {
  const uint64_t device_before = memory_stats(Device::cpu()).bytes_in_use;
  const uint64_t host_before = host_memory_stats().bytes_in_use;
  for (int64_t elements : {1, 3, 1000, 70000}) {
    const Tensor buffer = data::host_tensor(Shape({elements}), DType::kU8);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.raw_data()) % Allocator::kAlignment, 0u) << elements;
    EXPECT_EQ(host_memory_stats().bytes_in_use, host_before + static_cast<uint64_t>(elements));
  }
  EXPECT_EQ(memory_stats(Device::cpu()).bytes_in_use, device_before);
  EXPECT_EQ(host_memory_stats().bytes_in_use, host_before);
}

TEST_F(HostMemory, FreedBlocksAreKeptForTheNextOfTheirSizeUntilTrimmed) {
  // Large (a batch, in the lists all threads share), a few KiB (a file's contents, in 1 KiB steps)
  // and tiny (a traced map's window arithmetic: a 64-byte block), both kept on this thread.
  for (const auto& [bytes, block] : {std::pair<int64_t, uint64_t>{MiB, MiB}, {5000, 5120}, {16, 64}}) {
    trim_host_memory();
    const AllocatorStats before = host_memory_stats();
    const void* first = nullptr;
    {
      const Tensor t = data::host_tensor(Shape({bytes}), DType::kU8);
      first = t.raw_data();
    }
    EXPECT_EQ(host_memory_stats().bytes_reserved, before.bytes_reserved + block)
        << bytes << ": the freed block is kept";
    {
      const Tensor t = data::host_tensor(Shape({bytes}), DType::kU8);
      EXPECT_EQ(t.raw_data(), first) << bytes << ": the next block of its size reuses it";
    }
    EXPECT_EQ(trim_host_memory(), block);
    EXPECT_EQ(host_memory_stats().bytes_reserved, before.bytes_reserved);
  }
}

}  // namespace
}  // namespace nimbus
