#!/usr/bin/env bash
# model.fit from Python against `nimbus train` on the same example configs (the MLP and the CNN of
# examples/: same layers, data, batch 128, graph and jit as the YAML says), rounds interleaved so that
# both sides share the machine's noise. Both figures are the trainer's own throughput: samples/s of the
# training steps after the first 20, validation left out (summary.json's samples_per_sec for the CLI,
# History.samples_per_sec from Python). The must-hold: Python / CLI >= 0.95.
#
#   bench/python/fit_vs_cli.sh [ROUNDS] [EPOCHS] [STEPS]   # default 3 rounds of 1 whole epoch; needs build/release
#
# STEPS caps each epoch's steps (fit.steps_per_epoch on both sides), for short runs of the CNN.
#
# Both sides use every core (runtime.threads 0, as `import nimbus` does) and OMP_WAIT_POLICY=passive,
# which the CLI sets for itself by re-executing; a Python process gets libgomp's default otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
epochs=${2:-1}
steps=${3:-null}
nimbus=build/release/tools/nimbus/nimbus
export PYTHONPATH=build/release/python OMP_WAIT_POLICY=passive
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for round in $(seq "$rounds"); do
  for model in mlp cnn; do
    config=examples/fashion_mnist_$model.yaml
    "$nimbus" train "$config" --set fit.epochs="$epochs" --set fit.steps_per_epoch="$steps" --set fit.verbose=0 \
      --set runtime.threads=0 --run-dir "$work/cli-$model-$round" --summary "$work/cli-$model-$round.json" >/dev/null
    /usr/bin/python3 bench/python/fit_example.py "$config" "$epochs" "$steps" >"$work/py-$model-$round.json"
  done
done
date -u +"%Y-%m-%d %H:%M UTC, $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $rounds rounds x $epochs epochs, steps per epoch: $steps"
/usr/bin/python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
print("| model | nimbus train (CLI) | model.fit (Python) | Python / CLI |")
print("|---|---|---|---|")
for model in ("mlp", "cnn"):
    figures = {side: [json.load(open(f"{work}/{side}-{model}-{r}.json"))["samples_per_sec"]
                      for r in range(1, rounds + 1)] for side in ("cli", "py")}
    median = {side: statistics.median(values) for side, values in figures.items()}
    cells = [f"{median[s]:,.0f} ({min(figures[s]):,.0f}-{max(figures[s]):,.0f})" for s in ("cli", "py")]
    print(f"| {model} | {cells[0]} | {cells[1]} | {median['py'] / median['cli']:.3f} |")
PY
