#!/usr/bin/env bash
# Builds and runs bench_core (see bench/bench_core.cc) with Google Benchmark's
# JSON output into a file, then prints the ratios the engine-core goals are
# stated in (docs/performance.md, "Engine core (issue 2)").
#
#   bench/run_core.sh [OUT.json]      # default build/release/bench/bench_core.json
#   BENCH_REPETITIONS=10 BENCH_MIN_TIME=0.2 bench/run_core.sh   # the defaults
#
# Repetitions run interleaved in random order, so Nimbus and its reference
# share the machine's noise. The table gives the best repetition (noise from
# other processes only ever slows a run down) and, in brackets, the median.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/release/bench/bench_core.json}
[ -d build/release ] || cmake --preset release
cmake --build build/release --target bench_core
build/release/bench/bench_core --benchmark_format=json \
  --benchmark_repetitions="${BENCH_REPETITIONS:-10}" \
  --benchmark_min_time="${BENCH_MIN_TIME:-0.2}" \
  --benchmark_enable_random_interleaving=true >"$out"
echo "wrote $out"
python3 - "$out" <<'PY'
import json, statistics, sys
data = json.load(open(sys.argv[1]))
runs = {}
for b in data["benchmarks"]:
    if b["run_type"] == "iteration":
        runs.setdefault(b["run_name"].removesuffix("/real_time"), []).append(b.get("GFLOP/s", b.get("GB/s")))
best = {name: max(v) for name, v in runs.items()}
median = {name: statistics.median(v) for name, v in runs.items()}
ctx = data["context"]
print(f"{ctx['date']}: {ctx.get('compute_threads')} compute threads, {ctx['num_cpus']} CPUs, "
      f"{len(next(iter(runs.values())))} interleaved repetitions; best (median)")
print(f"{'benchmark':<26}{'Nimbus':>16}{'reference':>26}{'ratio':>14}  goal")
def row(label, name, ref_label, ref, goal=""):
    a, b = best[name], best[ref]
    print(f"{label:<26}{a:>8.1f} ({median[name]:>5.1f}){ref_label:>12}{b:>7.1f} ({median[ref]:>5.1f})"
          f"{a / b:>7.2f} ({median[name] / median[ref]:.2f})  {goal}")
for n in (1024, 2048):
    row(f"matmul {n}^3 GFLOP/s", f"matmul_nimbus/{n}", "oneDNN", f"matmul_onednn/{n}", ">= 0.95")
for n in (1 << 24, 1 << 26):
    size = f"2^{n.bit_length() - 1}"
    row(f"triad {size} GB/s", f"triad/{n}", "streaming", f"triad_nt/{n}")
    for op in ("add", "relu", "gelu"):
        row(f"{op} {size} GB/s", f"{op}_nimbus/{n}", "triad", f"triad/{n}", ">= 0.80")
    for op in ("add", "relu", "gelu"):
        row(f"{op} {size} new output", f"{op}_nimbus_alloc/{n}", "triad", f"triad/{n}")
PY
