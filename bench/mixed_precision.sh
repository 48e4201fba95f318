#!/usr/bin/env bash
# Mixed precision on the CPU, as issue 10 measures it: `nimbus train` on examples/fashion_mnist_cnn.yaml
# for EPOCHS epochs (default 3) under float32, mixed_float16 and mixed_bfloat16, for SEEDS seeds (default 3).
# Prints per policy the final validation accuracy of each seed, their median and its distance to
# float32's (goal: within 0.5 point), and the median training throughput (samples/s after the first 20
# steps) with the step-time ratio to float32 (goal on the CPU: at most 1.5). Timings want a quiet machine.
#
#   bench/mixed_precision.sh [SEEDS] [EPOCHS]
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-3}
epochs=${2:-3}
nimbus=build/release/tools/nimbus/nimbus
[ -d build/release ] || cmake --preset release
cmake --build build/release --target nimbus_cli >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for seed in $(seq "$seeds"); do
  # Policies alternate within a seed so that a change of load hits them alike.
  for policy in float32 mixed_float16 mixed_bfloat16; do
    "$nimbus" train examples/fashion_mnist_cnn.yaml --set runtime.seed="$seed" --set fit.epochs="$epochs" \
      --set runtime.precision="$policy" --set fit.verbose=0 \
      --run-dir "$work/$policy-$seed" --summary "$work/$policy-$seed.json" >/dev/null
  done
done
python3 - "$work" "$seeds" "$epochs" <<'PY'
import json, statistics, sys
work, seeds, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
results = {}
for policy in ("float32", "mixed_float16", "mixed_bfloat16"):
    runs = [json.load(open(f"{work}/{policy}-{seed}.json")) for seed in range(1, seeds + 1)]
    accuracy = [r["final"]["val_accuracy"] for r in runs]
    throughput = [r["samples_per_sec"] for r in runs]
    results[policy] = (statistics.median(accuracy), statistics.median(throughput))
    print(f"{policy}: val_accuracy after {epochs} epochs per seed {[round(a, 4) for a in accuracy]}, "
          f"median {results[policy][0]:.4f}; median {results[policy][1]:.0f} samples/s")
f32_accuracy, f32_throughput = results["float32"]
for policy in ("mixed_float16", "mixed_bfloat16"):
    accuracy, throughput = results[policy]
    gap = 100 * (accuracy - f32_accuracy)
    ratio = f32_throughput / throughput
    print(f"{policy}: {gap:+.2f} points vs float32 (goal within 0.5: {'holds' if abs(gap) <= 0.5 else 'MISSES'}); "
          f"step time {ratio:.2f}x float32's (goal <= 1.5: {'holds' if ratio <= 1.5 else 'MISSES'})")
PY
