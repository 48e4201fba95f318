// reexec_with_omp_defaults: re-executes the program once with
// OMP_WAIT_POLICY=passive when the user set no OpenMP wait setting, and
// leaves a user's setting alone.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "nimbus/device/runtime.h"

namespace nimbus {
namespace {

// In the copy of this binary that ReexecSetsPassiveWaitPolicy starts: report
// the wait policy the new process sees through the exit status, before main.
const bool kReexecChild = [] {
  if (std::getenv("NIMBUS_TEST_REEXEC_CHILD") == nullptr) return false;
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  std::_Exit(policy != nullptr && std::string(policy) == "passive" ? 0 : 3);
}();

TEST(OmpDefaults, ReexecSetsPassiveWaitPolicy) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    unsetenv("OMP_WAIT_POLICY");
    unsetenv("GOMP_SPINCOUNT");
    setenv("NIMBUS_TEST_REEXEC_CHILD", "1", 1);
    char program[] = "test_core";
    char* args[] = {program, nullptr};
    reexec_with_omp_defaults(1, args);
    std::_Exit(2);  // no exec happened
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: no re-exec; 3: the new process did not see OMP_WAIT_POLICY=passive";
}

TEST(OmpDefaults, UserSettingIsKept) {
  const char* before = std::getenv("OMP_WAIT_POLICY");
  const std::string saved = before != nullptr ? before : "";
  setenv("OMP_WAIT_POLICY", "active", 1);
  char program[] = "test_core";
  char* args[] = {program, nullptr};
  reexec_with_omp_defaults(1, args);  // returns: the user chose a policy
  EXPECT_STREQ(std::getenv("OMP_WAIT_POLICY"), "active");
  if (before != nullptr) {
    setenv("OMP_WAIT_POLICY", saved.c_str(), 1);
  } else {
    unsetenv("OMP_WAIT_POLICY");
  }
}

}  // namespace
}  // namespace nimbus
