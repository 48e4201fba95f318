// Starts a program as a child process with its stdout and stderr in files, so a test can signal
// it (SIGTERM, SIGKILL) mid-run and read what it printed.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace nimbus::testing {

class ChildProcess {
 public:
  // Runs `argv` (argv[0] a path) with stdout to `stdout_path` and stderr to `stderr_path`.
  ChildProcess(const std::vector<std::string>& argv, const std::string& stdout_path, const std::string& stderr_path)
      : stdout_path_(stdout_path), stderr_path_(stderr_path) {
    // Opened (and emptied) before the fork, so what a previous process wrote to the same files is
    // gone even when this one is killed before it runs a single instruction.
    const int out = open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out, STDOUT_FILENO);
      dup2(err, STDERR_FILENO);
      std::vector<char*> args;
      for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(out);
    close(err);
  }
  ~ChildProcess() {
    if (pid_ > 0 && !waited_) {
      kill(pid_, SIGKILL);
      wait();
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  void signal(int number) const { kill(pid_, number); }
  // True while the process runs.
  bool running() {
    if (waited_) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      waited_ = true;
      status_ = status;
    }
    return !waited_;
  }
  // Waits for the end; returns the raw wait status (WIFEXITED, WEXITSTATUS, WTERMSIG).
  int wait() {
    if (!waited_) {
      waitpid(pid_, &status_, 0);
      waited_ = true;
    }
    return status_;
  }
  std::string stdout_text() const { return read(stdout_path_); }
  std::string stderr_text() const { return read(stderr_path_); }

 private:
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  std::string stdout_path_, stderr_path_;
  pid_t pid_ = -1;
  bool waited_ = false;
  int status_ = 0;
};

}  // namespace nimbus::testing
