#!/usr/bin/env bash
# CPU training and input throughput against PyTorch, side by side in one run (issue 26's table;
# docs/performance.md). Each round runs every row on both sides back to back, so both share the
# machine's noise; the table gives medians with their ranges and the ratio of the medians.
#
#   bench/cpu_vs_torch.sh [--rounds N] [--jpegs COUNT] [--accuracy]
#
# Rows, all on 2 threads with OMP_WAIT_POLICY=passive:
#   mlp/cnn at batch B   `nimbus train examples/fashion_mnist_{mlp,cnn}.yaml` (graph + jit, one epoch
#                        of SAMPLES samples: summary.json's samples/s, after the first 20 steps) against
#                        ../shared/peers/py/train_fmnist.py --mode steps (same samples, 20 warm-up steps)
#   mlp 32 eager         the same with runtime.graph and runtime.jit off
#   jpeg                 bench_data's pipeline with AUTOTUNE (decode the crop window, flip, normalize,
#                        batch 128) against PyTorch's DataLoader, its best of 0, 1 and 2 workers
#                        (bench/dataloader_jpeg.py), on COUNT files (default 10,000)
# The ceilings, measured in each round: ../shared/peers/c/sgemm_dnnl 2048 (f32 GEMM GFLOP/s) and
# 2 x jpeg_decode's single-thread full-image rate on the same files (the two-core decode bound).
# PyTorch runs with the fastest OpenBLAS core of SkylakeX, Cooperlake and Haswell on the MLP at
# batch 256 (probed first, every core's rate printed), and the core it ran is printed.
#
# --accuracy adds issue 26's time-to-accuracy rows: the CNN example for 10 epochs with seeds 1-3
# (time from launch, data loading and validation included, to the first epoch at >= 90.0% test
# accuracy, and the accuracy after 5 epochs) against train_fmnist.py --model cnn --mode full
# --target 0.90 --max-epochs 10 with seeds 1-3 (its clock starts after loading the data); each seed's row
# says the epoch that reached 90.0%.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5 jpeg_count=10000 accuracy=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --jpegs) jpeg_count=$2; shift 2 ;;
    --accuracy) accuracy=1; shift ;;
    *) sed -n 2,25p "$0" >&2; exit 2 ;;
  esac
done
peers=${NIMBUS_PEERS:-../shared/peers}
python=/usr/bin/python3
[ -f build/release/build.ninja ] || cmake --preset release
cmake --build build/release --target nimbus_cli bench_data >/dev/null
nimbus=build/release/tools/nimbus/nimbus
# The ceilings' programs, compiled from ../shared (read-only) into build/peers.
mkdir -p build/peers
[ build/peers/sgemm_dnnl -nt "$peers/c/sgemm_dnnl.cpp" ] ||
  g++ -O3 -march=native -fopenmp "$peers/c/sgemm_dnnl.cpp" -ldnnl -o build/peers/sgemm_dnnl
[ build/peers/jpeg_decode -nt "$peers/c/jpeg_decode.c" ] ||
  gcc -O3 -march=native "$peers/c/jpeg_decode.c" -lturbojpeg -o build/peers/jpeg_decode
jpeg_dir=/tmp/nimbus-jpegs-$jpeg_count
if [ ! -f "$jpeg_dir/labels.csv" ]; then
  $python bench/make_jpegs.py "$jpeg_count" "$jpeg_dir" >/dev/null
  # jpeg_decode reads the file names from a labels.csv after a header line.
  { echo file,label; for ((i = 0; i < jpeg_count; ++i)); do echo "$i.jpg,0"; done; } >"$jpeg_dir/labels.csv"
fi
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
results=$work/results.jsonl

record() {  # record ROW WHO COMMAND...: COMMAND prints the value (a failing one stops the script)
  local value
  value=$("${@:3}")
  printf '{"row": "%s", "who": "%s", "value": %s}\n' "$1" "$2" "$value" >>"$results"
}
nimbus_rate() {  # nimbus_rate CONFIG BATCH SAMPLES [--set ...]: samples/s
  local config=$1 batch=$2 samples=$3
  shift 3
  rm -rf "$work/run"
  $nimbus train "$config" --set fit.epochs=1 --set fit.verbose=0 --set runtime.threads=2 \
    --set fit.batch_size="$batch" --set fit.steps_per_epoch=$((samples / batch)) "$@" \
    --run-dir "$work/run" --summary "$work/nimbus-summary.json" >/dev/null
  field samples_per_sec <"$work/nimbus-summary.json"
}
torch_rate() {  # torch_rate MODEL BATCH SAMPLES: samples/s
  $python "$peers/py/train_fmnist.py" --model "$1" --batch "$2" --threads 2 --mode steps \
    --steps $(($3 / $2)) --warmup 20 | field samples_per_s
}
field() {  # field NAME [FACTOR]: NAME of the JSON line on stdin, times FACTOR
  $python -c 'import json, sys; print(float(sys.argv[2]) * json.loads(sys.stdin.read())[sys.argv[1]])' "$1" "${2:-1}"
}
pipeline_rate() {  # images/s of bench_data's pipeline with AUTOTUNE
  build/release/bench/bench_data "$jpeg_count" "$jpeg_dir" -1 |
    awk '/nimbus pipeline, AUTOTUNE/ { for (i = 1; i <= NF; ++i) if ($i == "images/s") print $(i - 1) }'
}
loader_rate() {  # images/s of PyTorch's DataLoader, the best of 0, 1 and 2 workers
  for workers in 0 1 2; do $python bench/dataloader_jpeg.py "$jpeg_dir" "$jpeg_count" "$workers"; done | sort -g | tail -1
}
gemm_rate() { build/peers/sgemm_dnnl 2048 10 | field gflops_median; }
decode_bound() { build/peers/jpeg_decode "$jpeg_dir" 3 | field images_per_s_median 2; }

# PyTorch's fastest OpenBLAS core here.
best_core="" best_rate=0
for core in SkylakeX Cooperlake Haswell; do
  rate=$(OPENBLAS_CORETYPE=$core torch_rate mlp 256 20480)
  echo "PyTorch MLP batch 256 with OPENBLAS_CORETYPE=$core: $rate samples/s"
  if awk -v a="$rate" -v b="$best_rate" 'BEGIN { exit !(a > b) }'; then best_core=$core best_rate=$rate; fi
done
export OPENBLAS_CORETYPE=$best_core
echo "PyTorch runs with OPENBLAS_CORETYPE=$best_core: $(OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 $python bench/python/torch_blas.py)"

mlp=examples/fashion_mnist_mlp.yaml cnn=examples/fashion_mnist_cnn.yaml
for round in $(seq "$rounds"); do
  echo "round $round of $rounds" >&2
  for batch in 128 256; do
    record "mlp $batch" nimbus nimbus_rate $mlp $batch 80000
    record "mlp $batch" pytorch torch_rate mlp $batch 80000
  done
  record "mlp 32, graph + jit" nimbus nimbus_rate $mlp 32 40000
  record "mlp 32, eager" nimbus nimbus_rate $mlp 32 40000 --set runtime.graph=false --set runtime.jit=false
  torch_32=$(torch_rate mlp 32 40000)
  record "mlp 32, graph + jit" pytorch echo "$torch_32"
  record "mlp 32, eager" pytorch echo "$torch_32"
  for batch in 128 256; do
    record "cnn $batch" nimbus nimbus_rate $cnn $batch 20480
    record "cnn $batch" pytorch torch_rate cnn $batch 20480
  done
  record "jpeg pipeline" nimbus pipeline_rate
  record "jpeg pipeline" pytorch loader_rate
  record "sgemm 2048 GFLOP/s" onednn gemm_rate
  record "jpeg decode bound" libjpeg-turbo decode_bound
done

if [ -n "$accuracy" ]; then
  for seed in 1 2 3; do
    echo "time to 90%: seed $seed" >&2
    start=$(date +%s.%N)
    rm -rf "$work/run"
    $nimbus train $cnn --set fit.epochs=10 --set fit.verbose=0 --set runtime.threads=2 --set runtime.seed=$seed \
      --run-dir "$work/run" >/dev/null
    $python - "$work/run/metrics.jsonl" "$start" "$seed" >>"$results" <<'PY'
import json, sys
epochs = [r for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "epoch"]
hit = next((r for r in epochs if r["val_accuracy"] >= 0.90), None)
seconds = (hit or epochs[-1])["time"] - float(sys.argv[2])
print(json.dumps({"row": "cnn time to 90%", "who": "nimbus", "value": seconds, "reached": hit is not None,
                  "seed": int(sys.argv[3]), "epoch": (hit or epochs[-1])["epoch"],
                  "accuracy_epoch_5": epochs[4]["val_accuracy"]}))
PY
    start=$(date +%s.%N)
    $python "$peers/py/train_fmnist.py" --model cnn --threads 2 --mode full --target 0.90 --max-epochs 10 \
      --report-epoch 5 --seed $seed >"$work/torch.json"
    # Its time to target starts after it loaded the data; one that never reached it counts all 10 epochs.
    $python - "$work/torch.json" "$start" "$(date +%s.%N)" "$seed" >>"$results" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
reached = r["wall_s_to_target"] is not None
print(json.dumps({"row": "cnn time to 90%", "who": "pytorch", "reached": reached, "seed": int(sys.argv[4]),
                  "value": r["wall_s_to_target"] if reached else float(sys.argv[3]) - float(sys.argv[2]),
                  "epoch": r["epochs_to_target"] if reached else r["epochs_run"],
                  "accuracy_epoch_5": r["test_acc_at_report_epoch"]}))
PY
  done
fi

echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $rounds rounds"
$python bench/cpu_vs_torch_table.py "$results"
