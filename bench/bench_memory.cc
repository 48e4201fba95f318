// The BFC allocator against glibc on a recorded training run's requests
// (tests/memory/data/mlp_eager_trace.txt, bench/record_memory_trace.cc).
//
//   trace/{bfc,malloc,aligned_alloc}   one replay of the trace per iteration,
//       glibc with its defaults; counter per_pair = seconds per allocation +
//       its release; faults = page faults per replay.
//   trace/touched/{bfc,malloc}         the same, writing one byte per 4 KiB
//       page of each block as the op that fills it would: what glibc handing
//       memory back to the kernel costs in page faults.
//   trace/interleaved                  `rounds` replays of each, alternating,
//       so that both meet the same load, with glibc told to keep its memory
//       (mallopt: no trimming, mmap only past 32 MiB), so that neither pays
//       first touches; counters: the median ns per pair of each, their ratio
//       (bfc / malloc), and after the training steps (model, Adam slots and
//       data still live) the BFC allocator's fragmentation and reservation
//       against its peak in use.
//
// Every replay but the touched ones leaves the memory untouched, and each
// benchmark first runs one replay untimed (regions reserved, glibc's heap grown).
//
//   bench/run_memory.sh   (each benchmark in its own process; see there why)
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "nimbus/base/error.h"
#include "nimbus/device/bfc_allocator.h"
#include "nimbus/device/memory_trace.h"

namespace {

const nimbus::MemoryTrace& trace() {
  static const nimbus::MemoryTrace loaded = nimbus::read_memory_trace(NIMBUS_MEMORY_TRACE);
  return loaded;
}

// Index of the first event after the last training step (the teardown).
size_t end_of_steps() {
  size_t end = 0;
  for (const auto& phase : trace().phases) {
    if (phase.name.starts_with("step")) end = phase.end;
  }
  return end;
}

// Replays the trace's events [0, end) through `allocator`, a callable as
// allocate(bytes) and as release(ptr, bytes); `live` holds the pointers by id.
template <typename Allocator>
void replay(std::vector<void*>& live, Allocator allocator, size_t end) {
  for (size_t i = 0; i < end; ++i) {
    const nimbus::MemoryTraceEvent& e = trace().events[i];
    if (e.allocate) {
      live[e.id] = allocator(e.bytes);
    } else {
      allocator(live[e.id], trace().bytes[e.id]);
    }
  }
}

template <typename Allocator>
void replay_all(std::vector<void*>& live, Allocator allocator) {
  replay(live, allocator, trace().events.size());
}

std::unique_ptr<nimbus::BfcAllocator> make_bfc() {
  return std::make_unique<nimbus::BfcAllocator>("cpu:bench", nimbus::make_host_sub_allocator());
}

struct Bfc {
  nimbus::BfcAllocator& a;
  void* operator()(size_t bytes) const { return a.allocate(bytes); }
  void operator()(void* p, size_t bytes) const { a.deallocate(p, bytes); }
};
struct Malloc {
  void* operator()(size_t bytes) const { return std::malloc(bytes); }
  void operator()(void* p, size_t) const { std::free(p); }
};
// What tensors need from glibc: 64-byte alignment, sizes in multiples of it.
struct AlignedAlloc {
  void* operator()(size_t bytes) const { return std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64)); }
  void operator()(void* p, size_t) const { std::free(p); }
};

long minor_page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Writes the first byte of each 4 KiB page of every block it hands out.
template <typename Allocator>
struct Touching {
  Allocator allocator;
  void* operator()(size_t bytes) const {
    auto* block = static_cast<volatile unsigned char*>(allocator(bytes));
    for (size_t offset = 0; offset < bytes; offset += 4096) block[offset] = 1;
    return const_cast<unsigned char*>(block);
  }
  void operator()(void* p, size_t bytes) const { allocator(p, bytes); }
};

template <typename Allocator>
void time_replays(benchmark::State& state, Allocator allocator) {
  std::vector<void*> live(trace().allocations());
  replay_all(live, allocator);  // warm-up: regions reserved, glibc's heap grown
  const long faults_before = minor_page_faults();
  for (auto _ : state) {
    replay_all(live, allocator);
    benchmark::DoNotOptimize(live.data());
  }
  state.counters["faults"] =
      benchmark::Counter(static_cast<double>(minor_page_faults() - faults_before), benchmark::Counter::kAvgIterations);
  state.counters["per_pair"] =
      benchmark::Counter(static_cast<double>(trace().allocations()),
                         benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void trace_bfc(benchmark::State& state) {
  auto bfc = make_bfc();
  time_replays(state, Bfc{*bfc});
}
void trace_malloc(benchmark::State& state) { time_replays(state, Malloc{}); }
void trace_aligned_alloc(benchmark::State& state) { time_replays(state, AlignedAlloc{}); }
void trace_touched_bfc(benchmark::State& state) {
  auto bfc = make_bfc();
  time_replays(state, Touching<Bfc>{Bfc{*bfc}});
}
void trace_touched_malloc(benchmark::State& state) { time_replays(state, Touching<Malloc>{}); }

template <typename Allocator>
double ns_per_pair(std::vector<void*>& live, Allocator allocator) {
  const auto start = std::chrono::steady_clock::now();
  replay_all(live, allocator);
  const auto end = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(end - start).count() / static_cast<double>(trace().allocations());
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

void trace_interleaved(benchmark::State& state) {
  const int rounds = static_cast<int>(state.range(0));
  // Process-wide and for good: this benchmark runs last.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  auto bfc = make_bfc();
  std::vector<void*> live(trace().allocations());
  std::vector<double> bfc_ns, malloc_ns, aligned_ns;
  for (auto _ : state) {
    ns_per_pair(live, Bfc{*bfc});
    ns_per_pair(live, Malloc{});
    ns_per_pair(live, AlignedAlloc{});
    for (int r = 0; r < rounds; ++r) {
      // Alternate who goes first, so that neither always follows the other's cache footprint.
      if (r % 2 == 0) {
        bfc_ns.push_back(ns_per_pair(live, Bfc{*bfc}));
        malloc_ns.push_back(ns_per_pair(live, Malloc{}));
      } else {
        malloc_ns.push_back(ns_per_pair(live, Malloc{}));
        bfc_ns.push_back(ns_per_pair(live, Bfc{*bfc}));
      }
      aligned_ns.push_back(ns_per_pair(live, AlignedAlloc{}));
    }
  }
  state.counters["bfc_ns"] = median(bfc_ns);
  state.counters["malloc_ns"] = median(malloc_ns);
  state.counters["aligned_alloc_ns"] = median(aligned_ns);
  state.counters["bfc/malloc"] = median(bfc_ns) / median(malloc_ns);

  // Memory after the steps, on a fresh allocator: what one training run leaves.
  auto fresh = make_bfc();
  replay(live, Bfc{*fresh}, end_of_steps());
  const nimbus::AllocatorStats s = fresh->stats();
  state.counters["fragmentation"] = s.fragmentation();
  state.counters["reserved/peak"] =
      static_cast<double>(s.peak_bytes_reserved) / static_cast<double>(s.peak_bytes_in_use);
  state.counters["in_use_MiB"] = static_cast<double>(s.bytes_in_use) / (1 << 20);
  state.counters["reserved_MiB"] = static_cast<double>(s.bytes_reserved) / (1 << 20);
}

BENCHMARK(trace_bfc)->Name("trace/bfc");
BENCHMARK(trace_malloc)->Name("trace/malloc");
BENCHMARK(trace_aligned_alloc)->Name("trace/aligned_alloc");
BENCHMARK(trace_touched_bfc)->Name("trace/touched/bfc");
BENCHMARK(trace_touched_malloc)->Name("trace/touched/malloc");
BENCHMARK(trace_interleaved)->Name("trace/interleaved")->Arg(200)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
