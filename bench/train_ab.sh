#!/usr/bin/env bash
# `nimbus train` throughput of two builds side by side: rounds alternate build A and build B on
# the same config (default the MLP example, one epoch, 2 threads), so both share the machine's
# noise; the table gives each build's median samples/s (RunDirectory's summary: after the first
# 20 steps), its range, and B / A. For "no slowdown" checks of a change: A is the parent's build.
#
#   bench/train_ab.sh NIMBUS_A NIMBUS_B [ROUNDS] [CONFIG] [--set ...]   # default 5 rounds
#
# A libnimbus.so beside a binary is the one it loads (a copied build).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n 2,9p "$0" >&2; exit 2; }
nimbus_a=$(realpath "$1") nimbus_b=$(realpath "$2")
rounds=${3:-5}
config=${4:-examples/fashion_mnist_mlp.yaml}
shift $(($# < 4 ? $# : 4))
overrides=(--set fit.epochs=1 --set fit.verbose=0 --set runtime.threads=2 "$@")
export OMP_WAIT_POLICY=passive
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() {  # run BUILD_NAME BINARY ROUND
  local lib_dir
  lib_dir=$(dirname "$2")
  LD_LIBRARY_PATH="$([ -f "$lib_dir/libnimbus.so" ] && echo "$lib_dir")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$2" train "$config" "${overrides[@]}" --run-dir "$work/$1-$3" --summary "$work/$1-$3.json" >/dev/null
}
for round in $(seq "$rounds"); do
  run a "$nimbus_a" "$round"
  run b "$nimbus_b" "$round"
done
date -u +"%Y-%m-%d %H:%M UTC, $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $config, $rounds rounds"
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
medians = {}
for build in ("a", "b"):
    values = [json.load(open(f"{work}/{build}-{r}.json"))["samples_per_sec"] for r in range(1, rounds + 1)]
    medians[build] = statistics.median(values)
    print(f"build {build.upper()}: median {medians[build]:8.0f} samples/s  (range {min(values):.0f}-{max(values):.0f})")
print(f"B / A: {medians['b'] / medians['a']:.3f}")
PY
