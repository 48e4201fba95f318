#!/usr/bin/env bash
# Builds the `fuzz` preset (Debian's clang, libFuzzer, AddressSanitizer) and runs each parser's
# fuzz target (config: the training config's YAML loader) for SECONDS (default 20) from its
# committed seed corpus (fuzz/corpus/TARGET).
#   fuzz/run.sh [SECONDS] [TARGET...]      targets: idx csv tfrecord image config
# New interesting inputs go to a scratch folder (the committed corpus stays small); a crash stops
# the script with its input saved as build/fuzz/crash-TARGET-*, to turn into a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(idx csv tfrecord image config)

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "${NIMBUS_FUZZ_JOBS:-$(nproc)}"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for target in "${targets[@]}"; do
  mkdir -p "$scratch/$target"
  # rss/malloc limits: a header that claims gigabytes must be refused, not allocated.
  # A fixed seed (NIMBUS_FUZZ_SEED) keeps CI's short runs repeatable; set another to explore further.
  "build/fuzz/fuzz/fuzz_$target" -seed="${NIMBUS_FUZZ_SEED:-1}" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1 \
    -artifact_prefix="build/fuzz/crash-$target-" "$scratch/$target" "fuzz/corpus/$target" 2>"$scratch/$target.log" ||
    { tail -n 60 "$scratch/$target.log"; echo "fuzz: $target crashed (input under build/fuzz/crash-$target-*)" >&2; exit 1; }
  runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$scratch/$target.log" | grep -o '[0-9]*$' || echo '?')"
  echo "fuzz: $target: $runs inputs in ${seconds}s, no crash"
done
