#!/usr/bin/env bash
# The ring model of communication time (plan::ring_allreduce_seconds, the
# planner's) against MultiWorkerMirrored's measured all-reduce over loopback:
# two MPI processes, buffers of 16 KiB to 32 MiB (docs/performance.md).
#
#   bench/allreduce_model.sh [REPEATS]     # default 20 all-reduces per size
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build/release --target bench_all_reduce >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "uptime before: $(uptime)"
mpirun --oversubscribe -np 2 build/release/bench/bench_all_reduce "${1:-20}"
