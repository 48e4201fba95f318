#!/usr/bin/env bash
# The planner's accuracy on this machine: `nimbus bench` calibrates the CPU, then for the MLP and the
# CNN examples at three batch sizes the planner's predicted step time for the local machine is printed
# next to the step time `nimbus train` measures (batch / samples_per_sec of its summary, measured after
# the first 20 steps; the median of three runs, with their range) and the error. Run it on a quiet machine: both sides are timings.
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
printf '%-5s %6s %14s %14s %8s %10s %10s   %s\n' model batch "predicted ms" "measured ms" error "input ms" "host ms" \
  "measured range ms"
for model in mlp cnn; do
  for batch in 32 128 512; do
    config=examples/fashion_mnist_$model.yaml
    # The prediction and two of its parts (the input's and the trainer's own time), in seconds.
    predicted=$("$nimbus" --threads 2 plan "$config" --local --profile "$profile" --gpus cpu --clouds local \
      --batch "$batch" --json 2>/dev/null | python3 -c 'import json,sys; p = json.load(sys.stdin)["plans"][0]
print(p["step_seconds"], p["step_parts"]["input_seconds"], p["step_parts"]["host_seconds"])')
    # The measured step: the median of three runs (one run's step moves by up to 30% from the next's).
    measured=()
    for run in 1 2 3; do
      "$nimbus" --threads 2 train "$config" --set fit.batch_size="$batch" --set fit.epochs=1 \
        --set fit.steps_per_epoch="$steps" --set fit.verbose=0 --summary "$summary" >/dev/null 2>&1
      measured+=("$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples_per_sec"])' "$summary")")
    done
    python3 - "$model" "$batch" $predicted "${measured[@]}" <<'PY'
import statistics, sys
model, batch = sys.argv[1], int(sys.argv[2])
predicted, input_part, host_part = map(float, sys.argv[3:6])
runs = sorted(batch / float(rate) for rate in sys.argv[6:])
measured = statistics.median(runs)
print(f"{model:5} {batch:6} {predicted * 1e3:14.2f} {measured * 1e3:14.2f} {predicted / measured - 1:+8.1%}"
      f" {input_part * 1e3:10.2f} {host_part * 1e3:10.2f}   {runs[0] * 1e3:.2f}-{runs[-1] * 1e3:.2f}")
PY
  done
done
