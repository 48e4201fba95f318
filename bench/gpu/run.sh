#!/usr/bin/env bash
# One device call: configures the GPU-only build (cmake/NimbusGpuOnly.cmake) with
# ninja, builds the CUDA tests and bench_gpu, runs the `gpu` and `cuda-build`
# labels, bench_gpu and PyTorch's side (bench/gpu/torch_train.py), and writes one
# Markdown table to ${OUT:-build/gpu-run}/gpu_results.md (also printed), with the
# logs beside it. cuDNN comes from pip (nvidia-cudnn-cu13) when the toolkit lacks
# it. fmt, nlohmann_json and GoogleTest come from third_party/
# (scripts/vendor-gpu-deps) unless installed. A failing step is reported in the
# table and the script goes on to the next one. bench_gpu's last rows, and
# torch_train.py's autocast rows, are mixed precision's GPU goal (issue 10:
# bf16 / f32 step throughput ≥ 2.5×, docs/mixed_precision.md).
#   bench/gpu/run.sh            # on the GPU machine, from the repository root
#   NIMBUS_GPU_RUN_TORCH_COMPILE=0 bench/gpu/run.sh   # skip torch.compile's rows
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-build/gpu-run}
mkdir -p "$out"
build=build/gpu
results="$out/gpu_results.md"
: >"$results"
say() { echo "$*" | tee -a "$results"; }
elapsed() { echo $(($(date +%s) - $1)); }

cudnn_args=()
if [ ! -e /usr/local/cuda/include/cudnn.h ]; then
  # pip's nvidia-cudnn-cu13 puts include/cudnn.h and lib/libcudnn.so.9 under site-packages/nvidia/cudnn.
  header=$(python3 -c 'import nvidia, os; print(" ".join(nvidia.__path__))' 2>/dev/null |
    xargs -r -n1 -I{} find {} -name cudnn.h -path '*include*' 2>/dev/null | head -1)
  [ -n "$header" ] && cudnn_args=(-DNIMBUS_CUDNN_ROOT="$(dirname "$(dirname "$header")")")
fi

say "## GPU run, $(date -u +%Y-%m-%d) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
say ""
say "| what | figure | against |"
say "|---|---|---|"
start=$(date +%s)
if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIMBUS_GPU_ONLY=ON "${cudnn_args[@]}" \
  -DNIMBUS_CUDA_ARCHS="${NIMBUS_CUDA_ARCHS:-90-real}" >"$out/configure.log" 2>&1; then
  say "| configure | failed after $(elapsed "$start") s | see configure.log |"
  tail -30 "$out/configure.log"
  exit 1
fi
if ! cmake --build "$build" -j "$(nproc)" --target test_cuda test_gpu bench_gpu >"$out/build.log" 2>&1; then
  say "| build | failed after $(elapsed "$start") s | see build.log |"
  grep -m 20 -E "error|Error" "$out/build.log"
  exit 1
fi
say "| build (configure + test_cuda, test_gpu, bench_gpu; $(nproc) cores) | $(elapsed "$start") s | |"

start=$(date +%s)
ctest --test-dir "$build" -L '^(gpu|cuda-build)$' -j 8 --timeout 120 --output-on-failure >"$out/ctest.log" 2>&1
summary=$(grep -E "tests passed|tests failed" "$out/ctest.log" | tail -1)
skipped=$(grep -c "(Skipped)" "$out/ctest.log")
say "| ctest -L 'gpu\|cuda-build' | ${summary:-no summary, see ctest.log} | ${skipped} skipped; $(elapsed "$start") s |"
grep -E "^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception)" "$out/ctest.log" | head -40 |
  sed 's/^ */| failed: /; s/$/ | | |/' | tee -a "$results"

start=$(date +%s)
"$build/bench/gpu/bench_gpu" 2>&1 | tee -a "$results" | grep -v '^|' || true
NIMBUS_CUDA_TF32=1 "$build/bench/gpu/bench_gpu" 2>&1 | tee -a "$results" | grep -v '^|' || true
say "| bench_gpu | $(elapsed "$start") s | |"

start=$(date +%s)
compile_flag=()
[ "${NIMBUS_GPU_RUN_TORCH_COMPILE:-1}" = 0 ] && compile_flag=(--no-compile)
PYTHONUNBUFFERED=1 timeout 240 python3 bench/gpu/torch_train.py "${compile_flag[@]}" 2>"$out/torch.log" |
  tee -a "$results" || say "| torch_train.py | failed or timed out | see torch.log |"
say "| torch_train.py | $(elapsed "$start") s | |"
echo
cat "$results"
