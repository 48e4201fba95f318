// NCCL is loaded at run time (src/device/cuda/nccl_library.h): found here under the
// toolkit, refused with the reason and remedy when NIMBUS_NCCL_LIBRARY names something
// that is not it, and reported by `nimbus info`. ncclGetVersion needs no GPU.
#include "src/device/cuda/nccl_library.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "support/run_command.h"

namespace nimbus {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kToolkitNccl = std::string(NIMBUS_CUDA_LIBRARY_DIR) + "/libnccl.so.2";

TEST(NcclLibrary, FoundUnderTheToolkit) {
  // The GPU machines may have NCCL from pip only; this machine's toolkit has it.
  if (!std::filesystem::exists(kToolkitNccl)) GTEST_SKIP() << "the toolkit has no " << kToolkitNccl;
  cuda::NcclApi api;
  const NcclStatus status = cuda::find_nccl(nullptr, &api);
  ASSERT_TRUE(status.loaded) << status.reason;
  EXPECT_EQ(std::filesystem::canonical(status.path), std::filesystem::canonical(kToolkitNccl));
  EXPECT_GE(status.version, 21200) << "NCCL 2.12 or newer";
  int version = 0;
  ASSERT_EQ(api.ncclGetVersion(&version), cuda::kNcclSuccess);
  EXPECT_EQ(version, status.version);
  EXPECT_THAT(status.to_string(), StartsWith("nccl: 2."));
  EXPECT_EQ(std::string(api.ncclGetErrorString(cuda::kNcclInProgress)).empty(), false);
}

TEST(NcclLibrary, AMissingOverrideIsRefusedWithTheRemedy) {
  const NcclStatus status = cuda::find_nccl("/nonexistent/libnccl.so.2", nullptr);
  EXPECT_FALSE(status.loaded);
  EXPECT_THAT(status.reason, HasSubstr("NIMBUS_NCCL_LIBRARY=/nonexistent/libnccl.so.2 does not load"));
  EXPECT_THAT(status.reason, HasSubstr("No such file"));
  EXPECT_THAT(status.remedy, HasSubstr("point NIMBUS_NCCL_LIBRARY at a libnccl.so.2"));
}

TEST(NcclLibrary, AnOverrideThatIsNotNcclIsRefused) {
  // A real shared library without NCCL's functions: the refusal names the first one missing.
  const std::string runtime = std::string(NIMBUS_CUDA_LIBRARY_DIR) + "/libcudart.so";
  const NcclStatus status = cuda::find_nccl(runtime.c_str(), nullptr);
  EXPECT_FALSE(status.loaded);
  EXPECT_THAT(status.reason, HasSubstr("has no ncclGetVersion: it is not NCCL 2.12 or newer"));
}

#ifdef NIMBUS_CLI
TEST(NcclLibrary, NimbusInfoSaysWhichNcclOrWhyNone) {
  if (!std::filesystem::exists(kToolkitNccl)) GTEST_SKIP() << "the toolkit has no " << kToolkitNccl;
  const std::string found = testing::run_command(std::string(NIMBUS_CLI) + " info 2>&1");
  EXPECT_THAT(found, HasSubstr("nccl: 2."));
  EXPECT_THAT(found, HasSubstr("libnccl.so.2)"));
  const std::string refused =
      testing::run_command("NIMBUS_NCCL_LIBRARY=/bogus/libnccl.so.2 " + std::string(NIMBUS_CLI) + " info 2>&1");
  EXPECT_THAT(refused, HasSubstr("nccl: not available: NIMBUS_NCCL_LIBRARY=/bogus/libnccl.so.2 does not load"));
}
#endif  // NIMBUS_CLI: a GPU-only build has no CLI

}  // namespace
}  // namespace nimbus
