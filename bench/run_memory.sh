#!/usr/bin/env bash
# Builds and runs bench_memory (see bench/bench_memory.cc), each benchmark in
# a process of its own: glibc's dynamic mmap threshold carries over from one
# benchmark to the next in one process, so a glibc figure would depend on
# what ran before it.
#
#   bench/run_memory.sh
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d build/release ] || cmake --preset release
cmake --build build/release --target bench_memory
uptime
for name in bfc malloc aligned_alloc touched/bfc touched/malloc interleaved; do
  build/release/bench/bench_memory --benchmark_filter="^trace/$name(/|\$)" 2>/dev/null | grep '^trace/'
done
