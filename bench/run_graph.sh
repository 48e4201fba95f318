#!/usr/bin/env bash
# Graph mode against eager and against PyTorch, side by side in one run:
# bench_graph (see bench/bench_graph.cc) and the PyTorch peer
# ../shared/peers/py/train_fmnist.py --mode steps on the same models and
# batches, with PyTorch's best thread setting (OMP_WAIT_POLICY=passive).
# Prints samples/s and the ratios the graph-mode goals are stated in
# (docs/performance.md, "Graph mode (issue 3)").
#
#   bench/run_graph.sh [OUT_DIR]        # default build/release/bench
#   BENCH_REPETITIONS=5 bench/run_graph.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/release/bench}
threads=${THREADS:-2}
peers=../shared/peers/py
[ -d build/release ] || cmake --preset release
cmake --build build/release --target bench_graph
mkdir -p "$out"
OMP_NUM_THREADS=$threads build/release/bench/bench_graph --benchmark_format=json \
  --benchmark_repetitions="${BENCH_REPETITIONS:-5}" --benchmark_min_time="${BENCH_MIN_TIME:-1}" \
  --benchmark_enable_random_interleaving=true >"$out/bench_graph.json"
for model in mlp cnn; do
  for batch in 32 128; do
    [ "$model" = cnn ] && [ "$batch" = 32 ] && continue
    OMP_WAIT_POLICY=passive /usr/bin/python3 "$peers/train_fmnist.py" --model "$model" --batch "$batch" \
      --threads "$threads" --mode steps --steps "${PEER_STEPS:-200}" >"$out/torch_${model}_${batch}.json"
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys, os
out = sys.argv[1]
data = json.load(open(os.path.join(out, "bench_graph.json")))
runs = {}
for b in data["benchmarks"]:
    if b["run_type"] == "iteration":
        runs.setdefault(b["run_name"].removesuffix("/real_time"), []).append(b)
def median(name, key="samples/s"):
    return statistics.median(r[key] for r in runs[name])
torch = {}
for f in os.listdir(out):
    if f.startswith("torch_"):
        r = json.load(open(os.path.join(out, f)))
        torch[(r["model"], r["batch"])] = r["samples_per_s"]
print(f"{data['context']['date']}: medians of {len(next(iter(runs.values())))} repetitions, samples/s")
print(f"{'step':28} {'eager':>9} {'graph':>9} {'graph+jit':>10} {'PyTorch':>9}  jit/eager graph/eager jit/graph jit/PyTorch")
for model, batch in [("mlp", 32), ("mlp", 128), ("block", 256), ("cnn", 128)]:
    e, g, j = (median(f"{model}_step/{mode}/{batch}") for mode in ("eager", "graph", "graph_jit"))
    t = torch.get((model, batch))
    ts = f"{t:9.0f}" if t else f"{'-':>9}"
    tr = f"{j / t:11.2f}" if t else f"{'-':>11}"
    print(f"{model + ' batch ' + str(batch):28} {e:9.0f} {g:9.0f} {j:10.0f} {ts}  {j / e:9.2f} {g / e:11.2f} {j / g:9.2f} {tr}")
print("where the step's time goes (medians): kernels' share of the wall time, kernels and allocations per step")
for model, batch in [("mlp", 32), ("mlp", 128), ("block", 256), ("cnn", 128)]:
    cells = []
    for mode in ("eager", "graph", "graph_jit"):
        name = f"{model}_step/{mode}/{batch}"
        cells.append(f"{mode} {median(name, 'kernel_share'):.2f} / {median(name, 'kernels/step'):.0f} / "
                     f"{median(name, 'allocs/step'):.0f}")
    print(f"{model + ' batch ' + str(batch):16} " + ",  ".join(cells))
for model, batch in [("mlp", 32), ("block", 256), ("cnn", 128)]:
    for mode in ("graph", "graph_jit"):
        r = runs[f"{model}_step/{mode}/{batch}"][0]
        print(f"{model} {mode}: arena {r['arena_MiB']:.1f} MiB, without reuse {r['unplanned_MiB']:.1f} MiB "
              f"({r['arena_MiB'] / r['unplanned_MiB']:.2f}x), {r['ops']:.0f} ops, {r['allocs/step']:.0f} allocations/step")
PY
