// Devices, the backend registry, the CPU allocator's accounting, streams and
// runtime options.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>

#include "nimbus/device/backend.h"
#include "nimbus/device/runtime.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(Device, ParsesTypesAndIndices) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cpu:0"), Device::cpu(0));
  EXPECT_EQ(Device::parse("cpu:3"), Device::cpu(3));
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:1"), Device::cuda(1));
  EXPECT_EQ(Device::parse("gpu:2"), Device::cuda(2)) << "gpu is an alias of cuda";
  EXPECT_EQ(Device::cuda(1).to_string(), "cuda:1");
  EXPECT_EQ(Device::parse(Device::cuda(7).to_string()), Device::cuda(7));
  EXPECT_TRUE(Device::cpu().is_cpu());
  EXPECT_FALSE(Device::cuda().is_cpu());
}

TEST(Device, BadTextIsAnInvalidArgumentNamingIt) {
  for (const char* bad : {"", "tpu", "CPU", "cuda:", "cuda:-1", "cuda:x", "cuda:1:2", "cuda:01x", " cpu"}) {
    try {
      const Device d = Device::parse(bad);
      ADD_FAILURE() << "'" << bad << "' parsed as " << d.to_string();
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.message(), HasSubstr(std::string("'") + bad + "'"));
      EXPECT_FALSE(e.hint().empty()) << bad;
    }
  }
}

TEST(BackendRegistry, CpuIsAlwaysThere) {
  ASSERT_TRUE(has_backend(DeviceType::kCPU));
  Backend& cpu = backend(DeviceType::kCPU);
  EXPECT_EQ(cpu.type(), DeviceType::kCPU);
  EXPECT_EQ(cpu.device_count(), 1);
  EXPECT_THAT(cpu.describe(0), AllOf(HasSubstr("cpu:0"), HasSubstr("oneDNN")));
  EXPECT_EQ(&allocator_for(Device::cpu()), &cpu.allocator(0));
  EXPECT_EQ(default_stream_for(Device::cpu()).device(), Device::cpu());
}

TEST(BackendRegistry, MissingCudaBackendIsUnavailableWithAHint) {
  // Only a machine without a usable CUDA backend shows the registry's hint.
  if (has_backend(DeviceType::kCUDA)) GTEST_SKIP() << "this build has a CUDA backend with devices";
  try {
    backend(DeviceType::kCUDA);
    FAIL() << "no error";
  } catch (const Unavailable& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnavailable);
    EXPECT_THAT(e.message(), HasSubstr("cuda"));
    // A build without CUDA says how to get it; one with CUDA but no GPU says to check the driver.
    EXPECT_THAT(e.hint(), ::testing::AnyOf(HasSubstr("NIMBUS_CUDA"), HasSubstr("driver")));
  }
  // Making a tensor there fails the same way, without crashing.
  EXPECT_THROW(zeros({2}, DType::kF32, Device::cuda()), Unavailable);
  EXPECT_THROW(Tensor::empty({2}, DType::kF32, Device::cuda()), Unavailable);
}

TEST(BackendRegistry, DeviceIndexBeyondTheMachineIsNotFound) {
  try {
    allocator_for(Device::cpu(1));
    FAIL() << "no error";
  } catch (const NotFound& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("cpu:1"), HasSubstr("1 cpu device")));
  }
  EXPECT_THROW(default_stream_for(Device::cpu(-1)), NotFound);
  EXPECT_THROW(zeros({2}, DType::kF32, Device::cpu(1)), NotFound);
}

TEST(CpuAllocator, InUseAndPeakFollowTensorLifetimes) {
  Allocator& allocator = allocator_for(Device::cpu());
  allocator.reset_peak();
  const AllocatorStats before = allocator.stats();
  EXPECT_EQ(before.peak_bytes_in_use, before.bytes_in_use) << "reset_peak sets the peak to what is in use";
  constexpr size_t kBytes = 1 << 20;
  {
    const Tensor a = Tensor::empty({kBytes / 4}, DType::kF32);
    AllocatorStats during = allocator.stats();
    EXPECT_EQ(during.bytes_in_use, before.bytes_in_use + kBytes);
    EXPECT_EQ(during.num_allocations, before.num_allocations + 1);
    {
      const Tensor b = Tensor::empty({kBytes / 8}, DType::kF64);
      const Tensor view = b.reshape({2, kBytes / 16});
      during = allocator.stats();
      EXPECT_EQ(during.bytes_in_use, before.bytes_in_use + 2 * kBytes) << "a view allocates nothing";
      EXPECT_EQ(during.peak_bytes_in_use, before.bytes_in_use + 2 * kBytes);
    }
    during = allocator.stats();
    EXPECT_EQ(during.bytes_in_use, before.bytes_in_use + kBytes) << "b and its view are gone";
    EXPECT_EQ(during.peak_bytes_in_use, before.bytes_in_use + 2 * kBytes) << "the peak stays";
  }
  const AllocatorStats after = allocator.stats();
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_GE(after.bytes_reserved, after.bytes_in_use);
  allocator.reset_peak();
  EXPECT_EQ(allocator.stats().peak_bytes_in_use, before.bytes_in_use);
}

TEST(CpuAllocator, StorageLivesAsLongAsItsLastView) {
  Allocator& allocator = allocator_for(Device::cpu());
  const uint64_t before = allocator.stats().bytes_in_use;
  std::optional<Tensor> view;
  {
    const Tensor owner = zeros({256}, DType::kF32);
    view = owner.reshape({16, 16});
  }
  EXPECT_EQ(allocator.stats().bytes_in_use, before + 1024) << "the view keeps the storage alive";
  view.reset();
  EXPECT_EQ(allocator.stats().bytes_in_use, before);
}

TEST(CpuAllocator, AlignedUniqueBlocksEvenForZeroBytes) {
  Allocator& allocator = allocator_for(Device::cpu());
  EXPECT_FALSE(allocator.name().empty());
  void* a = allocator.allocate(0);
  void* b = allocator.allocate(0);
  void* c = allocator.allocate(100);
  ASSERT_NE(a, nullptr);
  EXPECT_NE(a, b);
  for (void* p : {a, b, c}) EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % Allocator::kAlignment, 0u);
  allocator.deallocate(a, 0);
  allocator.deallocate(b, 0);
  allocator.deallocate(c, 100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(zeros({3}).raw_data()) % Allocator::kAlignment, 0u);
}

TEST(CpuAllocator, ImpossibleRequestIsOutOfMemoryNotACrash) {
  Allocator& allocator = allocator_for(Device::cpu());
  const uint64_t before = allocator.stats().bytes_in_use;
  try {
    allocator.allocate(size_t{1} << 62);
    FAIL() << "a 4 EiB allocation succeeded";
  } catch (const OutOfMemory& e) {
    EXPECT_THAT(e.message(),
                AllOf(HasSubstr("cpu:0"), HasSubstr("cannot allocate 4096.0 PiB (4611686018427387904 bytes)")));
    EXPECT_FALSE(e.hint().empty());
  }
  EXPECT_EQ(allocator.stats().bytes_in_use, before) << "a failed allocation is not counted";
}

TEST(CpuStream, WorkIsDoneWhenEnqueued) {
  Stream& stream = default_stream_for(Device::cpu());
  const auto event = stream.record();
  EXPECT_TRUE(event->query());
  event->synchronize();
  stream.wait(*event);
  stream.synchronize();
}

TEST(Runtime, ThreadsAreConfigurable) {
  const RuntimeOptions saved = runtime_options();
  RuntimeOptions options;
  options.threads = 1;
  configure_runtime(options);
  EXPECT_EQ(compute_threads(), 1);
  EXPECT_EQ(runtime_options().threads, 1);
  options.threads = -2;
  try {
    configure_runtime(options);
    ADD_FAILURE() << "negative threads accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.message(), HasSubstr("-2"));
  }
  EXPECT_EQ(runtime_options().threads, 1) << "a rejected configuration changes nothing";
  configure_runtime(saved);
  EXPECT_GE(hardware_cores(), 1);
}

}  // namespace
}  // namespace nimbus
