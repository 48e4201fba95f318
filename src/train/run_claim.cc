#include "nimbus/train/run_claim.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <ostream>

#include "nimbus/base/error.h"
#include "nimbus/train/run_directory.h"

namespace nimbus::train {

namespace {

// The PID a lock file records, or "unknown PID" (a holder that had not written it yet).
std::string holder_of(int fd) {
  std::array<char, 32> text{};
  const ssize_t size = ::pread(fd, text.data(), text.size() - 1, 0);
  const long pid = size > 0 ? std::strtol(text.data(), nullptr, 10) : 0;
  return pid > 0 ? fmt::format("PID {}", pid) : "unknown PID";
}

// Opens (creating) the folder's lock file and takes its lock, or throws naming the holder.
int lock(const RunDirectory& run) {
  const int fd = ::open(run.lock_path().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw NotFound(fmt::format("{}: cannot claim the run directory: {}", run.lock_path(), std::strerror(errno)),
                   "pass --run-dir a folder you can write to");
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const std::string holder = holder_of(fd);
    ::close(fd);
    throw InvalidArgument(
        fmt::format("{}: in use by another nimbus ({}), which holds {}", run.path(), holder, run.lock_path()),
        "wait for that run to end or stop it (a killed process's claim ends with it), or give "
        "this run another --run-dir");
  }
  return fd;
}

// DIR.replaced-<local date-time>, with -2, -3, ... when taken.
std::string moved_aside_name(const std::string& path) {
  const std::string base = fmt::format("{}.replaced-{}", path, run_dir_timestamp());
  std::string name = base;
  for (int suffix = 2; std::filesystem::exists(name); ++suffix) name = fmt::format("{}-{}", base, suffix);
  return name;
}

void move_aside(const RunDirectory& run, std::ostream& log) {
  const int fd = lock(run);  // never move a live run
  const std::string aside = moved_aside_name(run.path());
  const int moved = std::rename(run.path().c_str(), aside.c_str());
  const int error = errno;
  ::close(fd);
  if (moved != 0) {
    throw NotFound(fmt::format("{}: cannot move the old run aside to {}: {}", run.path(), aside, std::strerror(error)),
                   "move or remove it yourself, or give this run another --run-dir");
  }
  log << fmt::format("nimbus: --overwrite: moved the run in {} aside to {}\n", run.path(), aside) << std::flush;
}

// `path` without a trailing '/', so that DIR/ and DIR are moved aside to the same name.
std::string folder_name(const std::string& path) {
  std::string name = std::filesystem::path(path).lexically_normal().string();
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  return name;
}

}  // namespace

RunClaim::RunClaim(const std::string& path, RunStart start, std::ostream& log) {
  const RunDirectory run(folder_name(path));
  if (start == RunStart::kOverwrite && run.holds_a_run()) move_aside(run, log);
  std::error_code error;
  std::filesystem::create_directories(run.path(), error);
  if (error) {
    throw NotFound(fmt::format("{}: cannot create the run directory: {}", run.path(), error.message()),
                   "pass --run-dir a folder you can write to");
  }
  lock_fd_ = lock(run);
  // Checked under the lock: a run that began since the check above is seen here.
  if (start != RunStart::kResume && run.holds_a_run()) {
    ::close(lock_fd_);
    throw InvalidArgument(
        fmt::format("{}: holds another run (config.json, metrics.jsonl or checkpoints/)", run.path()),
        fmt::format("--resume {0} continues that run; --overwrite moves it aside to {0}.replaced-<date-time> and "
                    "starts this one; or give this run another --run-dir",
                    run.path()));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, pid.data(), pid.size(), 0) < 0) {
    log << fmt::format("nimbus: {}: cannot record this process's PID: {}\n", run.lock_path(), std::strerror(errno));
  }
}

RunClaim::~RunClaim() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

}  // namespace nimbus::train
