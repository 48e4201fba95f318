#!/usr/bin/env bash
# Accuracy and time to accuracy of the examples, as issue 4 measures them: `nimbus train` on
# examples/fashion_mnist_{mlp,cnn}.yaml (5 epochs, Adam, the 10,000 test images as validation) for
# several seeds; per model the final validation accuracy of each seed and their median, and for the CNN
# the time to 90% validation accuracy (the summary's per-epoch elapsed_seconds, validation included).
# With --with-pytorch the PyTorch peer runs the CNN to 90% in the same session (../shared/peers, passive
# OpenMP waiting, 2 threads) and the ratio is printed. Timings want a quiet machine.
#
#   bench/train_accuracy.sh [SEEDS] [--with-pytorch]     # default 3 seeds
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-3}
peers=${NIMBUS_PEERS:-../shared/peers}
nimbus=build/release/tools/nimbus/nimbus
[ -d build/release ] || cmake --preset release
cmake --build build/release --target nimbus_cli >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for model in mlp cnn; do
  for seed in $(seq "$seeds"); do
    "$nimbus" train "examples/fashion_mnist_$model.yaml" --set runtime.seed="$seed" --set fit.verbose=0 \
      --run-dir "$work/$model-$seed" --summary "$work/$model-$seed.json" >/dev/null
  done
done
if [ "${2:-}" = --with-pytorch ]; then
  OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=passive /usr/bin/python3 "$peers/py/train_fmnist.py" \
    --model cnn --mode full --target 0.90 --report-epoch 1 --max-epochs 10 | tail -1 >"$work/pytorch.json"
fi
python3 - "$work" "$seeds" <<'PY'
import json, os, statistics, sys
work, seeds = sys.argv[1], int(sys.argv[2])
targets = {"mlp": 0.875, "cnn": 0.905}
for model in ("mlp", "cnn"):
    finals, times = [], []
    for seed in range(1, seeds + 1):
        summary = json.load(open(f"{work}/{model}-{seed}.json"))
        accs = [e["val_accuracy"] for e in summary["epochs"]]
        finals.append(summary["final"]["val_accuracy"])
        reached = [e["elapsed_seconds"] for e in summary["epochs"] if e["val_accuracy"] >= 0.90]
        times.append(reached[0] if reached else None)
        extra = f"  90% after {reached[0]:.0f} s" if reached else "  90% not reached"
        print(f"{model} seed {seed}: val_accuracy per epoch {[round(a, 4) for a in accs]}{extra}")
    median = statistics.median(finals)
    verdict = "holds" if median >= targets[model] else "MISSES"
    print(f"{model}: median final val_accuracy {median:.4f} (target {targets[model]}: {verdict})")
    if model == "cnn" and all(t is not None for t in times):
        nimbus_time = statistics.median(times)
        print(f"cnn: median time to 90% {nimbus_time:.0f} s")
        if os.path.exists(f"{work}/pytorch.json"):
            torch = json.load(open(f"{work}/pytorch.json"))["wall_s_to_target"]
            print(f"cnn: PyTorch time to 90% {torch:.0f} s; Nimbus / PyTorch = {nimbus_time / torch:.2f} (must be <= 0.67)")
PY
