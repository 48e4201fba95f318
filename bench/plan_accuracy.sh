#!/usr/bin/env bash
# The planner's accuracy on this machine: `nimbus bench` calibrates the CPU, then for the MLP and the
# CNN examples at three batch sizes the planner's predicted step time for the local machine is printed
# next to the step time `nimbus train` measures (batch / samples_per_sec of its summary, measured after
# the first 20 steps) and the error. Run it on a quiet machine: both sides are timings.
#
#   bench/plan_accuracy.sh [STEPS]     # training steps per measurement (default 150)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-150}
nimbus=build/release/tools/nimbus/nimbus
[ -d build/release ] || cmake --preset release
cmake --build build/release --target nimbus_cli >/dev/null
profile=$(mktemp --suffix=.json)
summary=$(mktemp --suffix=.json)
trap 'rm -f "$profile" "$summary"' EXIT
"$nimbus" --threads 2 bench --profile "$profile"
printf '%-5s %6s %14s %14s %8s\n' model batch "predicted ms" "measured ms" error
for model in mlp cnn; do
  for batch in 32 128 512; do
    config=examples/fashion_mnist_$model.yaml
    predicted=$("$nimbus" --threads 2 plan "$config" --local --profile "$profile" --gpus cpu --clouds local \
      --batch "$batch" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["plans"][0]["step_seconds"])')
    "$nimbus" --threads 2 train "$config" --set fit.batch_size="$batch" --set fit.epochs=1 \
      --set fit.steps_per_epoch="$steps" --set fit.verbose=0 --summary "$summary" >/dev/null 2>&1
    python3 - "$model" "$batch" "$predicted" "$summary" <<'PY'
import json, sys
model, batch, predicted, summary = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
measured = batch / json.load(open(summary))["samples_per_sec"]
print(f"{model:5} {batch:6} {predicted * 1e3:14.2f} {measured * 1e3:14.2f} {predicted / measured - 1:+8.1%}")
PY
  done
done
