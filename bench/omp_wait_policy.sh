#!/usr/bin/env bash
# Times the eager demo (batch 32) under each OpenMP wait setting, in
# interleaved rounds so that every setting sees the machine's load alike, and
# prints each run and the medians (docs/performance.md, OMP_WAIT_POLICY).
#
#   bench/omp_wait_policy.sh [ROUNDS] [EPOCHS]     # defaults 5 and 3
#
# The demo re-executes itself with OMP_WAIT_POLICY=passive when neither
# OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set, so libgomp's own default is
# measured as GOMP_SPINCOUNT=300000, which is what it means.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
epochs=${2:-3}
demo=build/release/examples/fashion_mnist_eager
[ -x "$demo" ] || cmake --build build/release --target fashion_mnist_eager
declare -A settings=(
  [libgomp_default]="GOMP_SPINCOUNT=300000"
  [passive]="OMP_WAIT_POLICY=passive"
  [active]="OMP_WAIT_POLICY=active"
  [spincount_10000]="GOMP_SPINCOUNT=10000"
  [one_thread]="OMP_WAIT_POLICY=passive --threads 1"
)
order=(libgomp_default passive active spincount_10000 one_thread)
results=$(mktemp)
for round in $(seq "$rounds"); do
  for name in "${order[@]}"; do
    read -r variable flags <<<"${settings[$name]}"
    load=$(cut -d' ' -f1 /proc/loadavg)
    seconds=$(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$variable" "$demo" --json --epochs "$epochs" ${flags:-} |
      tail -1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["seconds"])')
    echo "round $round  $name  ${seconds} s  (load average $load)" | tee -a "$results"
  done
done
python3 - "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    parts = line.split()
    runs.setdefault(parts[2], []).append(float(parts[3]))
print("setting              median s  runs")
for name, seconds in runs.items():
    print(f"{name:<20}{statistics.median(seconds):>9.2f}  {', '.join(f'{s:.2f}' for s in seconds)}")
PY
rm -f "$results"
