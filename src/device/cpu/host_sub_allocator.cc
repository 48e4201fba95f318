// Host memory regions for the CPU's BFC allocator.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "nimbus/device/bfc_allocator.h"

namespace nimbus {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

class HostSubAllocator final : public SubAllocator {
 public:
  std::string name() const override { return "host memory: aligned_alloc, mmap + MADV_HUGEPAGE from 2 MiB"; }

  void* allocate_region(size_t bytes) override {
    if (bytes < kHugePage) return std::aligned_alloc(kPage, round_up(bytes, kPage));
    // Over-map by a huge page and cut the ends off so that the region starts
    // on a 2 MiB boundary: only aligned 2 MiB ranges can become huge pages.
    const size_t size = round_up(bytes, kHugePage);
    void* raw = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    const auto start = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = round_up(start, kHugePage);
    if (aligned > start) munmap(raw, aligned - start);
    const uintptr_t tail = start + size + kHugePage - (aligned + size);
    if (tail > 0) munmap(reinterpret_cast<void*>(aligned + size), tail);
    // Advice only: a kernel without transparent huge pages refuses it and
    // serves 4 KiB pages, which works the same, only slower on first touch.
    madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
    return reinterpret_cast<void*>(aligned);
  }

  void free_region(void* ptr, size_t bytes) override {
    if (bytes < kHugePage) {
      std::free(ptr);
    } else {
      munmap(ptr, round_up(bytes, kHugePage));
    }
  }

  uint64_t free_memory() const override {
    std::ifstream meminfo("/proc/meminfo");
    std::string line;
    while (std::getline(meminfo, line)) {
      std::istringstream fields(line);
      std::string key;
      uint64_t kib = 0;
      if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
    }
    // Without /proc (not Linux, or a sandbox): the kernel's count of free pages.
    return static_cast<uint64_t>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  }

 private:
  static constexpr size_t kPage = 4096;
  static constexpr size_t round_up(size_t value, size_t unit) { return (value + unit - 1) / unit * unit; }
};

}  // namespace

std::unique_ptr<SubAllocator> make_host_sub_allocator() { return std::make_unique<HostSubAllocator>(); }

}  // namespace nimbus
