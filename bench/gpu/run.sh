#!/usr/bin/env bash
# One device call: configures the GPU-only build (cmake/NimbusGpuOnly.cmake) with
# ninja, builds the CUDA tests and bench_gpu, runs the `gpu` and `cuda-build`
# labels and the benchmarks, and writes one Markdown table to
# ${OUT:-build/gpu}/gpu_results.md (also printed). cuDNN comes from pip
# (nvidia-cudnn-cu13) when the toolkit lacks it. fmt, nlohmann_json and
# GoogleTest come from third_party/ (scripts/vendor-gpu-deps) unless installed.
#   bench/gpu/run.sh            # on the GPU machine, from the repository root
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-build/gpu}
mkdir -p "$out"
build=build/gpu
cudnn_args=()
if [ ! -e /usr/local/cuda/include/cudnn.h ]; then
  cudnn=$(python3 -c 'import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))' 2>/dev/null || true)
  [ -n "$cudnn" ] && cudnn_args=(-DNIMBUS_CUDNN_ROOT="$cudnn")
fi
start=$(date +%s)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIMBUS_GPU_ONLY=ON "${cudnn_args[@]}" \
  -DNIMBUS_CUDA_ARCHS="${NIMBUS_CUDA_ARCHS:-90-real}" >"$out/configure.log" 2>&1
cmake --build "$build" -j "$(nproc)" --target test_cuda test_gpu bench_gpu >"$out/build.log" 2>&1
built=$(($(date +%s) - start))
ctest --test-dir "$build" -L '^(gpu|cuda-build)$' -j "$(nproc)" --output-on-failure >"$out/ctest.log" 2>&1 || true
summary=$(grep -E "tests passed|tests failed" "$out/ctest.log" | tail -1)
skipped=$(grep -c "(Skipped)" "$out/ctest.log" || true)
{
  echo "## GPU run, $(date -u +%Y-%m-%d) on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  echo
  echo "| what | figure | against |"
  echo "|---|---|---|"
  echo "| build (configure + test_cuda, test_gpu, bench_gpu) | ${built} s | |"
  echo "| ctest -L 'gpu\|cuda-build' | ${summary} | ${skipped} skipped |"
  "$build/bench/gpu/bench_gpu" || echo "| bench_gpu | failed (exit $?) | see above |"
  NIMBUS_CUDA_TF32=1 "$build/bench/gpu/bench_gpu" | grep tf32 || true
} | tee "$out/gpu_results.md"
