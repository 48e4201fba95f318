// For the fuzz targets: the input as a file (the readers take paths), in memory (memfd), and the
// rule every target checks: bad input is a nimbus::Error, never a crash or another exception.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "nimbus/base/error.h"

namespace nimbus::fuzz {

// An in-memory file holding `data`, readable by path as long as the object lives.
class MemoryFile {
 public:
  MemoryFile(const uint8_t* data, size_t size) : fd_(memfd_create("nimbus-fuzz", 0)) {
    if (fd_ < 0) std::abort();
    for (size_t written = 0; written < size;) {
      const ssize_t n = write(fd_, data + written, size - written);
      if (n <= 0) std::abort();
      written += static_cast<size_t>(n);
    }
  }
  ~MemoryFile() { close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

// Runs `parse`; a nimbus::Error is the expected answer to bad input, anything else escapes (and
// libFuzzer reports it).
template <typename Parse>
void expect_clean_errors(Parse parse) {
  try {
    parse();
  } catch (const nimbus::Error&) {
  }
}

}  // namespace nimbus::fuzz
