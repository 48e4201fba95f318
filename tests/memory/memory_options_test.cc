// Memory options: parsing, environment overrides, and the CPU device's
// allocator configured through them.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "nimbus/base/error.h"
#include "nimbus/base/size_units.h"
#include "nimbus/device/backend.h"
#include "nimbus/device/bfc_allocator.h"
#include "nimbus/device/memory.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uint64_t MiB = 1024 * 1024;

// Sets an environment variable for the scope and restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Restores the CPU allocator's defaults when a test ends.
struct CpuMemoryDefaults {
  ~CpuMemoryDefaults() { configure_memory(Device::cpu(), {}); }
};

TEST(MemoryOptions, ParsesModesAndLimits) {
  EXPECT_EQ(parse_memory_mode("growth"), MemoryMode::kGrowth);
  EXPECT_EQ(parse_memory_mode("preallocate"), MemoryMode::kPreallocate);
  EXPECT_EQ(memory_mode_name(MemoryMode::kPreallocate), "preallocate");
  EXPECT_EQ(parse_memory_limit("12GiB"), uint64_t{12} << 30);
  EXPECT_EQ(parse_memory_limit("1.5 GB"), uint64_t{1'500'000'000});
  EXPECT_EQ(parse_memory_limit("4096"), uint64_t{4096});
  EXPECT_EQ(parse_memory_limit("none"), std::nullopt);
  const MemoryOptions options = parse_memory_options("preallocate", 0.5, "8GiB");
  EXPECT_EQ(options.mode, MemoryMode::kPreallocate);
  EXPECT_EQ(options.fraction, 0.5);
  EXPECT_EQ(options.limit, uint64_t{8} << 30);
  const MemoryOptions defaults;
  EXPECT_EQ(defaults.mode, MemoryMode::kGrowth) << "growth is the default";
  EXPECT_EQ(defaults.fraction, 0.9);
  EXPECT_FALSE(defaults.limit.has_value());
}

TEST(MemoryOptions, BadValuesNameTheKey) {
  try {
    parse_memory_options("fast", 0.9, "none");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("runtime.memory.mode"), HasSubstr("'fast'")));
    EXPECT_THAT(e.hint(), AllOf(HasSubstr("growth"), HasSubstr("preallocate")));
  }
  try {
    parse_memory_options("growth", 0.9, "12 gigs");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("runtime.memory.limit"), HasSubstr("'12 gigs'")));
    EXPECT_THAT(e.hint(), HasSubstr("GiB"));
  }
  EXPECT_THROW(parse_memory_options("growth", 0.9, "0"), InvalidArgument);
  for (double fraction : {0.0, -0.5, 1.01}) {
    try {
      parse_memory_options("preallocate", fraction, "none");
      FAIL() << fraction;
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.message(), HasSubstr("runtime.memory.fraction"));
    }
  }
}

TEST(MemoryOptions, EnvironmentOverrides) {
  const MemoryOptions api{.mode = MemoryMode::kPreallocate, .fraction = 0.5, .limit = 1024 * MiB};
  {
    ScopedEnv mode("NIMBUS_MEMORY_MODE", "growth");
    ScopedEnv limit("NIMBUS_MEMORY_LIMIT", "256MiB");
    const MemoryOptions options = apply_memory_environment(api);
    EXPECT_EQ(options.mode, MemoryMode::kGrowth);
    EXPECT_EQ(options.limit, 256 * MiB);
    EXPECT_EQ(options.fraction, 0.5) << "no variable for the fraction";
  }
  {
    ScopedEnv limit("NIMBUS_MEMORY_LIMIT", "none");
    EXPECT_EQ(apply_memory_environment(api).limit, std::nullopt);
    EXPECT_EQ(apply_memory_environment(api).mode, MemoryMode::kPreallocate) << "unset variables change nothing";
  }
}

TEST(MemoryOptions, BadEnvironmentNamesTheVariableAndValue) {
  {
    ScopedEnv mode("NIMBUS_MEMORY_MODE", "lazy");
    try {
      apply_memory_environment({});
      FAIL() << "no error";
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.message(), HasSubstr("NIMBUS_MEMORY_MODE='lazy'"));
      EXPECT_THAT(e.hint(), AllOf(HasSubstr("growth"), HasSubstr("unset")));
    }
  }
  for (const char* bad : {"12 gigs", "0", "-1GiB", ""}) {
    ScopedEnv limit("NIMBUS_MEMORY_LIMIT", bad);
    try {
      apply_memory_environment({});
      FAIL() << "no error for '" << bad << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.message(), HasSubstr(std::string("NIMBUS_MEMORY_LIMIT='") + bad + "'"));
      EXPECT_FALSE(e.hint().empty());
    }
  }
}

TEST(CpuMemory, TheCpuAllocatorIsTheBfcAllocatorInGrowthMode) {
  EXPECT_NE(dynamic_cast<BfcAllocator*>(&allocator_for(Device::cpu())), nullptr);
  EXPECT_EQ(memory_options(Device::cpu()).mode, MemoryMode::kGrowth);
  EXPECT_THAT(allocator_for(Device::cpu()).name(), AllOf(HasSubstr("bfc"), HasSubstr("MADV_HUGEPAGE")));
}

TEST(CpuMemory, TensorsReuseMemoryAndTrimGivesItBack) {
  { const Tensor warm = Tensor::empty({16 * MiB / 4}, DType::kF32); }
  const AllocatorStats before = memory_stats(Device::cpu());
  for (int i = 0; i < 20; ++i) {
    const Tensor t = Tensor::empty({16 * MiB / 4}, DType::kF32);
  }
  EXPECT_EQ(memory_stats(Device::cpu()).region_reservations, before.region_reservations)
      << "freed tensors' memory serves the next ones";
  {
    const Tensor big = Tensor::empty({64 * MiB / 4}, DType::kF32);
    EXPECT_GE(memory_stats(Device::cpu()).bytes_reserved, before.bytes_reserved + 64 * MiB);
  }
  EXPECT_GE(trim_memory(Device::cpu()), 64 * MiB);
  EXPECT_LT(memory_stats(Device::cpu()).bytes_reserved, before.bytes_reserved + 64 * MiB);
  EXPECT_THAT(memory_summary(Device::cpu()), AllOf(HasSubstr("cpu:0"), HasSubstr("mode growth")));
}

TEST(CpuMemory, LimitAppliesToTensorsAndTheEnvironmentWins) {
  CpuMemoryDefaults restore;
  trim_memory(Device::cpu());
  // 32 MiB above what this process still holds (other tests' live tensors),
  // so that the test means the same whatever ran before it.
  const uint64_t limit = memory_stats(Device::cpu()).bytes_reserved + 32 * MiB;
  {
    ScopedEnv variable("NIMBUS_MEMORY_LIMIT", std::to_string(limit).c_str());
    configure_memory(Device::cpu(), {.limit = 1024 * MiB});
  }
  EXPECT_EQ(memory_options(Device::cpu()).limit, limit) << "the environment overrides the API";
  const int64_t too_large = static_cast<int64_t>((limit + 4 * MiB) / 4);  // f32 elements past the limit
  try {
    const Tensor t = Tensor::empty({too_large}, DType::kF32);
    FAIL() << "a tensor of " << 4 * too_large << " bytes under a limit of " << limit;
  } catch (const OutOfMemory& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("cpu:0"), HasSubstr(fmt::format("({} bytes)", 4 * too_large)),
                                   HasSubstr("limit " + format_bytes(limit))));
    EXPECT_THAT(e.hint(), HasSubstr("NIMBUS_MEMORY_LIMIT"));
  }
  const Tensor fits = Tensor::empty({MiB / 4}, DType::kF32);
  EXPECT_LE(memory_stats(Device::cpu()).bytes_reserved, limit);
  EXPECT_EQ(memory_stats(Device::cpu()).bytes_limit, limit);
}

TEST(CpuMemory, PreallocateTakesAFractionOfMemAvailable) {
  CpuMemoryDefaults restore;
  const uint64_t available = make_host_sub_allocator()->free_memory();
  ASSERT_GT(available, 0u);
  const AllocatorStats before = memory_stats(Device::cpu());
  // Reserving costs address space only: the pages are touched when used.
  configure_memory(Device::cpu(), {.mode = MemoryMode::kPreallocate, .fraction = 0.05});
  const AllocatorStats after = memory_stats(Device::cpu());
  EXPECT_EQ(after.region_reservations, before.region_reservations + 1);
  const double reserved = static_cast<double>(after.bytes_reserved - before.bytes_reserved);
  EXPECT_NEAR(reserved, 0.05 * static_cast<double>(available), 0.01 * static_cast<double>(available));
  for (int i = 0; i < 10; ++i) {
    const Tensor t = Tensor::empty({MiB}, DType::kF32);
  }
  EXPECT_EQ(memory_stats(Device::cpu()).region_reservations, after.region_reservations) << "preallocate reserves once";
}

TEST(HostSubAllocator, LargeRegionsStartOnHugePageBoundaries) {
  auto host = make_host_sub_allocator();
  for (size_t bytes : {size_t{4096}, size_t{1} << 20, size_t{2} << 20, size_t{6} << 20, (size_t{5} << 20) + 256}) {
    void* region = host->allocate_region(bytes);
    ASSERT_NE(region, nullptr);
    const size_t alignment = bytes >= (size_t{2} << 20) ? size_t{2} << 20 : 4096;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(region) % alignment, 0u) << bytes;
    static_cast<char*>(region)[0] = 1;
    static_cast<char*>(region)[bytes - 1] = 1;
    host->free_region(region, bytes);
  }
}

}  // namespace
}  // namespace nimbus
