#!/usr/bin/env bash
# The planner's side of the device proof's planner truth row (bench/gpu/run.sh): the predicted step
# time of the Fashion-MNIST MLP and CNN configs at batch 256, float32, on one H200
# (bench/gpu/device_proof_instance.yaml), written to bench/gpu/planner_predictions.json. Run here,
# with the full build: the GPU machine's GPU-only build has no `nimbus plan` (it reads YAML).
#   bench/gpu/predict_steps.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
nimbus=build/release/tools/nimbus/nimbus
predictions=()
for model in mlp cnn; do
  seconds=$("$nimbus" plan "examples/fashion_mnist_$model.yaml" --catalog bench/gpu/device_proof_instance.yaml \
    --gpus H200 --batch 256 --precision float32 --json 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["plans"][0]["step_seconds"])')
  predictions+=("$model=$seconds")
done
python3 - "$(git rev-parse --short HEAD)" "${predictions[@]}" >bench/gpu/planner_predictions.json <<'PY'
import datetime, json, sys
print(json.dumps({
    "gpu": "H200", "batch": 256, "precision": "float32",
    "made": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d} at {sys.argv[1]} by bench/gpu/predict_steps.sh",
    "step_seconds": {k: float(v) for k, v in (a.split("=") for a in sys.argv[2:])},
}, indent=1))
PY
cat bench/gpu/planner_predictions.json
