#!/usr/bin/env bash
# Data-parallel scaling on one machine (docs/performance.md, "Distribution"):
# the CNN example at a global batch of 256, each replica with one compute
# thread, as
#   one worker (one_device, 1 thread),
#   two MPI workers (mpirun -np 2, multi_worker_mirrored, 1 thread each),
#   the same with every bucket all-reduced after the backward pass (overlap: false),
#   two logical CPU devices in one process (mirrored, 1 thread each),
# printing samples/s (after the first 20 steps), the ratio to one worker (the
# issue asks >= 1.6 for two MPI workers) and overlapped / after-backward (>= 1).
#
#   bench/distributed_scaling.sh [STEPS]     # default 60 steps per run (100 for the figures in the docs)
#
# Needs a quiet machine for meaningful figures: it prints the load average.

set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-60}
nimbus=build/release/tools/nimbus/nimbus
[ -x "$nimbus" ] || cmake --build build/release --target nimbus_cli
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The CNN example without its validation split (not part of the step).
sed '/^  validation:/,+2d' examples/fashion_mnist_cnn.yaml >"$work/cnn.yaml"
common=(--set fit.batch_size=256 --set fit.epochs=1 --set "fit.steps_per_epoch=$steps" --set fit.verbose=0
  --set runtime.threads=1)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "uptime before: $(uptime)"

run() {  # NAME COMMAND...: runs and prints samples/s
  local name=$1
  shift
  local load
  load=$(cut -d' ' -f1 /proc/loadavg)
  "$@" --run-dir "$work/$name" --summary "$work/$name.json" >"$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; exit 1; }
  python3 -c 'import json, sys; print("%.1f" % json.load(open(sys.argv[1]))["samples_per_sec"])' "$work/$name.json" \
    >"$work/$name.rate"
  echo "$name: $(cat "$work/$name.rate") samples/s (load average before: $load)"
}

run one_worker "$nimbus" train "$work/cnn.yaml" "${common[@]}"
# The CNN's 1.7 MB of gradients fit one default (25 MiB) bucket, which is ready only when the whole
# backward pass is: buckets of 512 KiB give the overlap something to overlap (three buckets).
mpi=(--set runtime.strategy.type=multi_worker_mirrored --set runtime.strategy.bucket_size=512KiB)
run mpi_2_workers mpirun --oversubscribe -np 2 "$nimbus" train "$work/cnn.yaml" "${common[@]}" "${mpi[@]}"
run mpi_2_workers_after_backward mpirun --oversubscribe -np 2 "$nimbus" train "$work/cnn.yaml" "${common[@]}" \
  "${mpi[@]}" --set runtime.strategy.overlap=false
run mirrored_2_devices "$nimbus" train "$work/cnn.yaml" "${common[@]}" --set runtime.threads=2 \
  --set "runtime.strategy={type: mirrored, devices: [cpu:0, cpu:1]}"
ratio() {  # A B: prints A / B
  python3 -c 'import sys; print(f"{sys.argv[1]} / {sys.argv[2]}: {float(sys.argv[3]) / float(sys.argv[4]):.2f}x")' \
    "$1" "$2" "$(cat "$work/$1.rate")" "$(cat "$work/$2.rate")"
}
ratio mpi_2_workers one_worker
ratio mirrored_2_devices one_worker
ratio mpi_2_workers mpi_2_workers_after_backward
echo "uptime after: $(uptime)"
