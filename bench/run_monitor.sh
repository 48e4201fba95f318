#!/usr/bin/env bash
# The monitor's cost (docs/performance.md, "Monitoring"):
#  1. bench_monitor: the step profiler's and the run monitor's time per step against an MLP step;
#  2. the exporter under load: `wrk` with 4 connections for 10 s against /metrics while
#     `nimbus train` runs, then the same training without wrk: wrk's errors and latency
#     percentiles, and the training slowdown (samples/s of the two runs).
#
#   bench/run_monitor.sh            EPOCHS=8 (each epoch is 469 steps of batch 128)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d build/release ] || cmake --preset release
cmake --build build/release --target bench_monitor nimbus_cli
uptime

build/release/bench/bench_monitor --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>/dev/null |
  grep -E '_(median) ' | tee /tmp/nimbus_bench_monitor.txt
awk '/profiler\/spans_median/ {s=$2} /profiler\/run_monitor_median/ {m=$2}
     /step\/mlp_batch128_median/ {t=$2 * 1000}
     END {printf "profiler alone: %.3f%% of an MLP step; with the run monitor: %.3f%%\n", 100*s/t, 100*m/t}' \
  /tmp/nimbus_bench_monitor.txt

nimbus=build/release/tools/nimbus/nimbus
epochs=${EPOCHS:-8}
port=${PORT:-19400}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
train=("$nimbus" train examples/fashion_mnist_mlp.yaml --set "fit.epochs=$epochs" --set fit.verbose=0)

"${train[@]}" --metrics-port "$port" --summary "$work/loaded.json" > "$work/loaded.log" 2>&1 &
pid=$!
until (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null; do sleep 0.1; done
sleep 2  # past tracing and warm-up
wrk -c 4 -t 2 -d 10s --latency "http://127.0.0.1:$port/metrics" | tee "$work/wrk.txt"
kill -0 "$pid" 2> /dev/null || echo "warning: training ended before wrk did; raise EPOCHS"
wait "$pid"
"${train[@]}" --summary "$work/quiet.json" > "$work/quiet.log" 2>&1
python3 - "$work/loaded.json" "$work/quiet.json" <<'PY'
import json, sys
loaded, quiet = (json.load(open(p))["samples_per_sec"] for p in sys.argv[1:3])
print(f"samples/s with wrk on /metrics: {loaded:.0f}, without: {quiet:.0f}, slowdown {100 * (1 - loaded / quiet):.1f}%")
PY
