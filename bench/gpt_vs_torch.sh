#!/usr/bin/env bash
# A small GPT's training tokens/s side by side: Nimbus (bench/bench_gpt.cc: MultiHeadAttention with
# the fused attention op, fit's traced step) against the same model written the usual PyTorch way
# (bench/gpt_torch.py: nn.TransformerEncoder, norm_first, a causal float mask), both on random
# windows of one byte text, 2 threads, OMP_WAIT_POLICY=passive. PyTorch runs on the fastest
# OpenBLAS core of SkylakeX, Haswell and its default (a short trial of each; its core printed).
# Rounds alternate Nimbus and PyTorch so that they share the machine's noise; the table pools
# every timed step of every round (median and range) and gives the ratio within this run.
#
#   bench/gpt_vs_torch.sh [ROUNDS] [TEXT_FILE]    # default 3, /usr/share/common-licenses/GPL-3
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
text=${2:-/usr/share/common-licenses/GPL-3}
[ -d build/release ] || cmake --preset release
cmake --build build/release --target bench_gpt >/dev/null
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=2
median_of() { grep '^step' | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
best=default best_rate=0
for coretype in SkylakeX Haswell default; do
  rate=$(if [ "$coretype" = default ]; then /usr/bin/python3 bench/gpt_torch.py "$text" 5 2; else
    OPENBLAS_CORETYPE=$coretype /usr/bin/python3 bench/gpt_torch.py "$text" 5 2; fi | median_of)
  echo "trial: PyTorch with OPENBLAS_CORETYPE=$coretype: $rate tokens/s"
  if awk "BEGIN{exit !($rate > $best_rate)}"; then best=$coretype best_rate=$rate; fi
done
[ "$best" = default ] || export OPENBLAS_CORETYPE=$best
steps=$(mktemp)
for round in $(seq "$rounds"); do
  build/release/bench/bench_gpt "$text" 10 3 | sed 's/^step_tokens_per_s/step nimbus/' | tee -a "$steps" | grep -v '^step'
  /usr/bin/python3 bench/gpt_torch.py "$text" 10 3 | sed 's/^step_tokens_per_s/step pytorch/' | tee -a "$steps" |
    grep -v '^step'
done
echo "small GPT training, batch 32 x context 128: $rounds rounds x 10 steps each (tokens/s)"
python3 - "$steps" <<'PY'
import statistics, sys
rates = {}
for line in open(sys.argv[1]):
    if line.startswith("step "):
        _, who, rate = line.split()
        rates.setdefault(who, []).append(float(rate))
torch = statistics.median(rates["pytorch"])
print(f"{'':8} {'median':>9} {'range':>20} {'vs pytorch':>11}")
for who in ("nimbus", "pytorch"):
    r = rates[who]
    m = statistics.median(r)
    print(f"{who:8} {m:9.0f} {min(r):9.0f} .. {max(r):7.0f} {m / torch:10.2f}x")
PY
rm -f "$steps"
