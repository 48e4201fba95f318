// Runs a shell command and returns what it printed on stdout, for tests that
// check a program end to end (the README's demo, the CLI).
#pragma once

#include <array>
#include <cstdio>
#include <memory>
#include <string>

namespace nimbus::testing {

inline std::string run_command(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return {};
  std::string output;
  std::array<char, 4096> buffer;
  while (fgets(buffer.data(), buffer.size(), pipe.get()) != nullptr) output += buffer.data();
  return output;
}

}  // namespace nimbus::testing
