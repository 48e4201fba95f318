#!/usr/bin/env bash
# Training throughput side by side: Nimbus's fit (examples/fashion_mnist_fit,
# graph mode with fusion, and eager) against the PyTorch peer
# (../shared/peers/py/train_fmnist.py --mode steps) on the peers' MLP and CNN,
# batch 128, 2 threads, data in memory, OMP_WAIT_POLICY=passive for both.
# Rounds alternate Nimbus and PyTorch so they share the machine's noise; the
# table gives the median of the rounds and the ratio Nimbus / PyTorch.
#
#   bench/train_vs_torch.sh [ROUNDS]    # default 3
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
peers=${NIMBUS_PEERS:-../shared/peers}
[ -d build/release ] || cmake --preset release
cmake --build build/release --target fashion_mnist_fit >/dev/null
export OMP_WAIT_POLICY=passive
out=$(mktemp)
for round in $(seq "$rounds"); do
  for model in mlp cnn; do
    steps=$([ "$model" = mlp ] && echo 300 || echo 60)
    for mode in graph eager; do
      flag=$([ "$mode" = eager ] && echo --eager || true)
      build/release/examples/fashion_mnist_fit --model "$model" --batch 128 --threads 2 --steps "$steps" $flag --json |
        tail -1 | sed "s/^{/{\"who\": \"nimbus-$mode\", /" >>"$out"
    done
    /usr/bin/python3 "$peers/py/train_fmnist.py" --model "$model" --batch 128 --threads 2 --mode steps \
      --steps "$steps" --warmup 10 | sed 's/^{/{"who": "pytorch", /' >>"$out"
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
# The machine's f32 GEMM ceiling (../shared/peers/README.md) and the MLP's FLOPs per training sample.
ceiling_mlp = 140e9 / 3.2e6
by = {}
for r in rows:
    sps = r.get("samples_per_sec", r.get("samples_per_s"))
    by.setdefault((r["model"], r["who"]), []).append(sps)
print(f"{'model':5} {'who':14} {'samples/s (median)':>18} {'vs pytorch':>10}")
for model in ("mlp", "cnn"):
    torch = statistics.median(by[(model, "pytorch")])
    for who in ("nimbus-graph", "nimbus-eager", "pytorch"):
        v = statistics.median(by[(model, who)])
        extra = f"  ({v / ceiling_mlp:.0%} of the GEMM ceiling)" if model == "mlp" else ""
        print(f"{model:5} {who:14} {v:18.0f} {v / torch:10.2f}{extra}")
PY
rm -f "$out"
