// Allocation traces: what an allocator was asked for during a stretch of a
// program, as a small text file that tests and benchmarks replay
// (tests/memory/data/, bench/bench_memory.cc; bench/record_memory_trace.cc writes one).
//
//   allocator.start_recording();
//   run_one_training_step();
//   MemoryTrace trace;
//   trace.add(allocator.stop_recording(), "step 1");
//   write_memory_trace(trace, "step.txt", "eager MLP, batch 128");
//   const MemoryTrace again = read_memory_trace("step.txt");
//
// File format, one event a line: "a <id> <bytes> <tag>" (an allocation; ids
// count from 0, `tag` is MemoryTag's value), "f <id>" (its release),
// "# <phase> done" after each phase, other lines starting with '#' comments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "nimbus/device/allocator.h"
#include "nimbus/device/bfc_allocator.h"

namespace nimbus {

struct MemoryTraceEvent {
  bool allocate = false;
  // The allocation's number in the trace (a release names the allocation it frees).
  uint32_t id = 0;
  // Allocations only: the request and its tag.
  uint64_t bytes = 0;
  MemoryTag tag = MemoryTag::kUntagged;
};

struct MemoryTrace {
  struct Phase {
    std::string name;
    // Index of the first event after the phase.
    size_t end = 0;
  };
  std::vector<MemoryTraceEvent> events;
  std::vector<Phase> phases;
  // The request size of each allocation, by id.
  std::vector<uint64_t> bytes;

  // Appends one recorded phase (BfcAllocator::stop_recording()), numbering
  // its allocations after those already in the trace. Releases of blocks
  // allocated before recording began are left out.
  void add(const std::vector<MemoryEvent>& recorded, const std::string& phase);
  size_t allocations() const { return bytes.size(); }

 private:
  std::unordered_map<uintptr_t, uint32_t> live_;  // address -> id, of blocks not yet released
};

// Throws NotFound for a missing file and DataError naming the line for a malformed one.
MemoryTrace read_memory_trace(const std::string& path);
// `title` becomes the first comment line. Throws Unavailable when the file cannot be written.
void write_memory_trace(const MemoryTrace& trace, const std::string& path, const std::string& title);

}  // namespace nimbus
