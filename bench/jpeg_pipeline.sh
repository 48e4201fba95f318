#!/usr/bin/env bash
# The input-pipeline benchmark, side by side in one run (docs/data.md): COUNT 128x128 JPEGs made from
# Fashion-MNIST (bench/make_jpegs.py, kept in DIR between runs, never committed), then the same
# pipeline — read the file, decode, random crop 112, flip, normalize, batch 128 — through Nimbus
# (parallelism 1, 2 and AUTOTUNE, with prefetch; bench/bench_data.cc) and PyTorch's DataLoader with
# 0, 1 and 2 workers (bench/dataloader_jpeg.py), next to libjpeg-turbo's single-thread decode rate.
# Nimbus decodes only the crop window (decode_and_random_crop); its last run decodes whole images.
# Run it on a quiet machine.
#
#   bench/jpeg_pipeline.sh [COUNT=20000] [DIR=/tmp/nimbus-jpegs]
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-20000}
dir=${2:-/tmp/nimbus-jpegs}
[ -f "$dir/$((count - 1)).jpg" ] || /usr/bin/python3 bench/make_jpegs.py "$count" "$dir"
[ -d build/release ] || cmake --preset release
cmake --build build/release --target bench_data >/dev/null
# Every setting runs twice (the second round in reverse order) and the best of the two counts, for
# Nimbus and DataLoader alike: on a shared machine one run can lose a core to another process.
nimbus=$(build/release/bench/bench_data "$count" "$dir" 1,2,-1,-1,2,1)
echo "$nimbus"
best_torch=0
for workers in 0 1 2 2 1 0; do
  rate=$(/usr/bin/python3 bench/dataloader_jpeg.py "$dir" "$count" "$workers")
  printf '%-38s %10s images/s\n' "PyTorch DataLoader, $workers workers" "$rate"
  best_torch=$((rate > best_torch ? rate : best_torch))
done
# The rate is the field before "images/s".
rate_of() { awk -v pattern="$1" '$0 ~ pattern { for (i = 2; i <= NF; ++i) if ($i == "images/s" && $(i - 1) > best) best = $(i - 1) }
                                  END { printf "%d", best }'; }
best_nimbus=$(echo "$nimbus" | rate_of 'nimbus pipeline')
autotune=$(echo "$nimbus" | rate_of 'AUTOTUNE')
fixed=$(echo "$nimbus" | rate_of 'parallel [0-9]')
echo "nimbus best / DataLoader best: $(awk -v a="$best_nimbus" -v b="$best_torch" 'BEGIN { printf "%.2f", a / b }')"
echo "AUTOTUNE / best fixed setting: $(awk -v a="$autotune" -v b="$fixed" 'BEGIN { printf "%.2f", a / b }')"
