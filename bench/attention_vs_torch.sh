#!/usr/bin/env bash
# Fused attention side by side: Nimbus's scaled_dot_product_attention against
# the same attention as separate ops (Nimbus's unfused form) and against
# PyTorch 1.13 (attention written out in torch ops: Debian's torch has no
# scaled_dot_product_attention), forward + backward, causal, f32, batch 4,
# 4 heads, head size 64, T = 1024; then the allocator's peak memory of one
# training step of the attention at T = 512, 1024 and 2048.
# Both run on 2 threads with OMP_WAIT_POLICY=passive; PyTorch runs on the
# fastest OpenBLAS core of SkylakeX, Haswell and its default (each is timed
# first, and its openblas_get_corename printed). Rounds alternate Nimbus and
# PyTorch so that they share the machine's noise; each prints medians and
# ranges. Ratios are only ever taken within one run of this script.
#
#   bench/attention_vs_torch.sh [ROUNDS]    # default 7
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
[ -d build/release ] || cmake --preset release
cmake --build build/release --target bench_attention >/dev/null
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=2
torch_attention() {
  /usr/bin/python3 - "$@" <<'PY'
import ctypes, statistics, sys, time
import torch
torch.set_num_threads(2)
rounds = int(sys.argv[1])
try:
    core = ctypes.CDLL("libopenblas.so.0").openblas_get_corename
    core.restype = ctypes.c_char_p
    corename = core().decode()
except OSError:
    corename = "unknown (no libopenblas.so.0)"
b, h, t, d = 4, 4, 1024, 64
gen = torch.Generator().manual_seed(11)
q, k, v, g = (torch.rand(b, h, t, d, generator=gen) * 2 - 1 for _ in range(4))
mask = torch.full((t, t), float("-inf")).triu(1)
def step():
    qq, kk, vv = (x.clone().requires_grad_() for x in (q, k, v))
    p = torch.softmax(qq @ kk.transpose(-2, -1) * d ** -0.5 + mask, -1)
    (p @ vv).backward(g)
step()
times = []
for _ in range(rounds):
    start = time.perf_counter(); step(); times.append(time.perf_counter() - start)
    print(f"step pytorch {1e3 * times[-1]:.2f}")
print(f"pytorch  {1e3 * statistics.median(times):10.1f} ms   range {1e3 * min(times):.1f} .. {1e3 * max(times):.1f} ms"
      f"   (torch {torch.__version__}, OpenBLAS core {corename}, OPENBLAS_CORETYPE={__import__('os').environ.get('OPENBLAS_CORETYPE', 'default')})")
PY
}
# PyTorch's best OpenBLAS core on this machine: a short trial of each.
best=default best_ms=1e30
for coretype in SkylakeX Haswell default; do
  line=$(if [ "$coretype" = default ]; then torch_attention 3; else OPENBLAS_CORETYPE=$coretype torch_attention 3; fi |
    grep -v '^step')
  ms=$(echo "$line" | awk '{print $2}')
  echo "trial: $line"
  if awk "BEGIN{exit !($ms < $best_ms)}"; then best=$coretype best_ms=$ms; fi
done
[ "$best" = default ] || export OPENBLAS_CORETYPE=$best
echo "PyTorch runs with OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-default}"
steps=$(mktemp)
for round in $(seq "$rounds"); do
  build/release/bench/bench_attention --rounds 3 | grep '^step' >>"$steps"
  torch_attention 3 | grep '^step' >>"$steps"
done
echo "attention forward + backward, causal, f32, B 4 H 4 T 1024 D 64: $rounds rounds x 3 steps each"
python3 - "$steps" <<'PY'
import statistics, sys
times = {}
for line in open(sys.argv[1]):
    _, who, ms = line.split()
    times.setdefault(who, []).append(float(ms))
fused = statistics.median(times["fused"])
print(f"{'':8} {'median ms':>10} {'range ms':>18} {'fused speed-up':>15}")
for who in ("fused", "unfused", "pytorch"):
    t = times[who]
    m = statistics.median(t)
    print(f"{who:8} {m:10.1f} {min(t):8.1f} .. {max(t):7.1f} {m / fused:14.2f}x")
PY
rm -f "$steps"
build/release/bench/bench_attention --rounds 1 --memory | sed -n '/peak memory/,$p'
