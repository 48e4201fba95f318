#!/usr/bin/env bash
# The device proof: one call on a GPU machine (CUDA toolkit, CMake, ninja, PyTorch; cuDNN and NCCL
# from pip; no network) that builds the GPU-only configuration (cmake/NimbusGpuOnly.cmake) and runs
# the single-GPU path end to end. Each row prints as soon as it is measured (so a time-out still
# returns the rows done) into ${OUT:-build/gpu-run}/gpu_results.md and, rewritten after every row,
# gpu_results.json, with the logs beside them. A failing step is a row and the script goes on.
#
# Rows: the build; ctest -L '^(gpu|cuda-build)$' (with the NCCL and NVML cases by name);
# examples/fashion_mnist_fit's CNN on cuda:0, graph + jit, float32 then mixed_bfloat16, one epoch
# of Fashion-MNIST each (loss before and after, test accuracy >= 0.85, samples/s) against PyTorch's
# eager and torch.compile CNN at the same batch (bench/gpu/torch_train.py, same call); bench_gpu
# (GEMMs, cuDNN convolutions, mixed precision's bf16 / f32 ratios, issue 10; the fused attention at T = 1024
# and 4096 against F.scaled_dot_product_attention, issue 28); the planner's
# predicted step time on this GPU (bench/gpu/planner_predictions.json, made by
# bench/gpu/predict_steps.sh where the full build is) against the measured one.
#
# Carry third_party/ along (scripts/vendor-gpu-deps: fmt, nlohmann_json, CLI11, zlib's header,
# googletest, and Fashion-MNIST's four files in third_party/fashion-mnist).
#   bench/gpu/run.sh            # on the GPU machine, from the repository root
#   NIMBUS_GPU_RUN_TORCH_COMPILE=0 bench/gpu/run.sh   # skip torch.compile's rows
# Expected time on an H200 with 16 cores, from a cold machine: about 5 minutes (docs/cuda.md).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-build/gpu-run}
mkdir -p "$out"
build=build/gpu
results="$out/gpu_results.md"
rows="$out/rows.tsv"
: >"$results"
: >"$rows"
started_all=$(date +%s)
elapsed() { echo $(($(date +%s) - $1)); }

# One row: printed, appended to the Markdown table, and the JSON table rewritten.
row() {
  printf '| %s | %s | %s |\n' "$1" "$2" "$3" | tee -a "$results"
  printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$rows"
  python3 bench/gpu/proof_rows.py json "$rows" "$out/gpu_results.json" "$(elapsed "$started_all")" 2>/dev/null || true
}
say() { echo "$*" | tee -a "$results"; }
# A Markdown row of another program (`| what | figure | against |`) as a row of ours.
markdown_rows() {
  local what figure against
  while IFS='|' read -r _ what figure against _; do
    [ -n "$what" ] && row "$(trim "$what")" "$(trim "$figure")" "$(trim "$against")"
  done
}
trim() {
  local text="$1"
  text="${text#"${text%%[![:space:]]*}"}"
  printf '%s' "${text%"${text##*[![:space:]]}"}"
}

# cuDNN and NCCL from pip (nvidia-cudnn-cu13, nvidia-nccl-cu13) where the toolkit lacks them.
pip_nvidia=$(python3 -c 'import nvidia, os; print(" ".join(nvidia.__path__))' 2>/dev/null)
cudnn_args=()
if [ ! -e /usr/local/cuda/include/cudnn.h ] && [ -n "$pip_nvidia" ]; then
  header=$(find $pip_nvidia -name cudnn.h -path '*include*' 2>/dev/null | head -1)
  [ -n "$header" ] && cudnn_args=(-DNIMBUS_CUDNN_ROOT="$(dirname "$(dirname "$header")")")
fi
if [ -z "${NIMBUS_NCCL_LIBRARY:-}" ] && [ ! -e /usr/local/cuda/lib64/libnccl.so.2 ] && [ -n "$pip_nvidia" ]; then
  nccl=$(find $pip_nvidia -name libnccl.so.2 2>/dev/null | head -1)
  [ -n "$nccl" ] && export NIMBUS_NCCL_LIBRARY="$nccl"
fi

say "## GPU run, $(date -u '+%Y-%m-%d %H:%M UTC') on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
say ""
say "| what | figure | against |"
say "|---|---|---|"

start=$(date +%s)
if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIMBUS_GPU_ONLY=ON "${cudnn_args[@]}" \
  -DNIMBUS_CUDA_ARCHS="${NIMBUS_CUDA_ARCHS:-90-real}" >"$out/configure.log" 2>&1; then
  row "configure" "failed after $(elapsed "$start") s" "see configure.log"
  tail -30 "$out/configure.log"
  exit 1
fi
targets=(test_cuda test_gpu test_gpu_distribute test_gpu_monitor bench_gpu fashion_mnist_fit)
if ! cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >"$out/build.log" 2>&1; then
  row "GPU-only build" "failed after $(elapsed "$start") s" "see build.log"
  grep -m 20 -E "error|Error" "$out/build.log"
  exit 1
fi
row "GPU-only build (configure + ${targets[*]})" "$(elapsed "$start") s" "$(nproc) cores"

start=$(date +%s)
timeout 240 ctest --test-dir "$build" -L '^(gpu|cuda-build)$' -j 8 --timeout 120 --output-on-failure \
  >"$out/ctest.log" 2>&1
summary=$(grep -E "tests passed|tests failed" "$out/ctest.log" | tail -1)
skipped=$(grep -c "(Skipped)" "$out/ctest.log")
row "ctest -L '^(gpu\|cuda-build)\$'" "${summary:-no summary, see ctest.log}" "${skipped} skipped; $(elapsed "$start") s"
grep -E "^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception)" "$out/ctest.log" | head -40 |
  while read -r line; do row "failed" "$line" ""; done
# The GPU collectives and NVML by name: Passed, Skipped (with ctest's reason in ctest.log) or Failed.
for name in NcclLibrary.FoundUnderTheToolkit NcclGpu.OneRankAllReducesThroughTheStreamOrderedBuckets \
  MirroredGpu.OneReplicaStepAllReducesItsGradientsThroughNccl MirroredGpu.TwoReplicasTrainToTheWeightsOfOneGpu \
  NvmlGpu.ThreeSamplesWhileTheGpuWorksReadEveryDevice; do
  outcome=$(grep -E "Test +#[0-9]+: $name " "$out/ctest.log" | grep -oE "Passed|\*\*\*Skipped|\*\*\*Failed|Not Run" | head -1)
  row "$name" "${outcome:-not run}" "$([ "$name" = MirroredGpu.TwoReplicasTrainToTheWeightsOfOneGpu ] && echo 'needs >= 2 GPUs')"
done
row "NCCL" "${NIMBUS_NCCL_LIBRARY:-the toolkit's or the system's}" "NIMBUS_NCCL_LIBRARY"

# Fashion-MNIST, gunzipped first so that a build without zlib reads the same files.
fashion=""
for dir in third_party/fashion-mnist /usr/share/datasets/fashion-mnist; do
  [ -e "$dir/train-images-idx3-ubyte.gz" ] && fashion=$dir && break
done
fit=()
if [ -z "$fashion" ]; then
  row "fashion_mnist_fit" "skipped" "no Fashion-MNIST: run scripts/vendor-gpu-deps and carry third_party/"
else
  mkdir -p "$build/fashion-mnist"
  for file in "$fashion"/*-ubyte.gz; do
    plain="$build/fashion-mnist/$(basename "$file" .gz)"
    [ -e "$plain" ] || gunzip -c "$file" >"$plain"
  done
  for run in "cnn float32" "cnn mixed_bfloat16" "mlp float32"; do
    set -- $run
    start=$(date +%s)
    line=$(timeout 120 "$build/examples/fashion_mnist_fit" --model "$1" --precision "$2" --device cuda --batch 256 \
      --epochs 1 --data "$build/fashion-mnist" --json 2>"$out/fit_$1_$2.err" | tee "$out/fit_$1_$2.log" | grep '^{')
    fit+=("$line")
    if [ -z "$line" ]; then
      row "fashion_mnist_fit $1 cuda $2" "failed" "see fit_$1_$2.log and .err"
      continue
    fi
    python3 bench/gpu/proof_rows.py fit "$(elapsed "$start")" "$line" |
      while IFS=$'\t' read -r what figure against; do row "$what" "$figure" "$against"; done
  done
fi

start=$(date +%s)
compile_flag=()
[ "${NIMBUS_GPU_RUN_TORCH_COMPILE:-1}" = 0 ] && compile_flag=(--no-compile)
# PyTorch's eager and torch.compile MLP / CNN at batch 256, the mixed-precision and attention anchors, the GEMM ceiling.
PYTHONUNBUFFERED=1 timeout 200 python3 bench/gpu/torch_train.py "${compile_flag[@]}" 2>"$out/torch.log" |
  markdown_rows
row "torch_train.py" "$(elapsed "$start") s" "see torch.log"

start=$(date +%s)
# GEMMs, cuDNN convolution rows, the MLP / CNN steps and issue 10's bf16 / f32 rows; then TF32.
for tf32 in "" 1; do
  env ${tf32:+NIMBUS_CUDA_TF32=$tf32} timeout 150 "$build/bench/gpu/bench_gpu" 2>>"$out/bench_gpu.log" |
    markdown_rows
done
row "bench_gpu" "$(elapsed "$start") s" "see bench_gpu.log"

# The planner truth row: predicted (made where `nimbus plan` runs) against fashion_mnist_fit's measured step.
python3 bench/gpu/proof_rows.py planner bench/gpu/planner_predictions.json "${fit[@]}" |
  while IFS=$'\t' read -r what figure against; do row "$what" "$figure" "$against"; done
row "device proof" "$(elapsed "$started_all") s" "goal: under 480 s from a cold machine"
