// Claiming a run directory: one nimbus per folder, and never two runs mixed in one.
//
// The claim is an advisory lock (flock) on DIR/nimbus.lock, held for the process's life and released
// by the kernel when the process ends however it ends, so a killed pod (nimbus as PID 1, SIGKILL)
// leaves no stale claim. The lock file holds the holder's PID, named when a second nimbus is refused.
//
//   train::RunClaim claim("runs/cnn", train::RunStart::kNew, std::cout);   // throws when refused
//   ... write config.json, train ...                                        // the claim ends with `claim`
//
// Nothing is written before the checks pass: a refused claim leaves every file that was there as it was.
#pragma once

#include <iosfwd>
#include <string>

namespace nimbus::train {

// How a run takes its folder (nimbus train: no flag, --overwrite, --resume).
enum class RunStart {
  kNew,        // the folder (made if missing) must hold no run (RunDirectory::holds_a_run)
  kOverwrite,  // a run in the folder is moved aside, intact, to DIR.replaced-<date-time> first
  kResume,     // the folder's run continues (what it holds is the caller's to check)
};

class RunClaim {
 public:
  // Claims `path`, or throws: InvalidArgument when another process holds it (naming its PID) or when
  // kNew finds a run there (naming --overwrite and --resume), NotFound when it cannot be made. With
  // kOverwrite, says on `log` where the old run went.
  RunClaim(const std::string& path, RunStart start, std::ostream& log);
  ~RunClaim();
  RunClaim(const RunClaim&) = delete;
  RunClaim& operator=(const RunClaim&) = delete;

 private:
  int lock_fd_ = -1;
};

}  // namespace nimbus::train
