"""runtime.memory.limit is the device's memory for the model's tensors; the data set and the input
pipeline's buffers are host memory, counted apart (DESIGN.md, "device memory"; docs/memory.md).

Each case runs `nimbus train` as a real process: a batch that accumulation makes fit trains within the
limit, batches and limits that cannot fit are refused before the first step (and before the run
directory exists) with the numbers and the remedy, and a malformed limit is refused naming the key.
"""

import json
import re
from pathlib import Path

import pytest

from nimbus_process import assert_refused, assert_succeeded, run_nimbus, tiny_config

REPO = Path(__file__).resolve().parents[2]
FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
LIMIT = 96 << 20

needs_fashion_mnist = pytest.mark.skipif(not (FASHION_MNIST / "train-images-idx3-ubyte.gz").exists(),
                                         reason="Fashion-MNIST is not installed (dataset-fashion-mnist)")


def cnn_without_validation(folder: Path) -> Path:
    """examples/fashion_mnist_cnn.yaml without its validation split (10,000 images to score would
    take most of the case's time; the limit's accounting is the training step's)."""
    text = (REPO / "examples" / "fashion_mnist_cnn.yaml").read_text()
    text, removed = re.subn(r"\n  validation:\n(    .*\n)+", "\n", text)
    assert removed == 1, "the example's validation split was not found"
    path = folder / "cnn.yaml"
    path.write_text(text)
    return path


@needs_fashion_mnist
def test_a_batch_of_2048_accumulates_under_a_96mib_limit_and_stays_under_it(tmp_path):
    # The 60,000 images as f32 (179 MiB) are host memory: they once counted against the limit, and
    # loading them failed with an out-of-memory error instead of accumulating.
    run = tmp_path / "run"
    outcome = run_nimbus("train", cnn_without_validation(tmp_path), "--run-dir", run,
                         "--set", "fit.batch_size=2048", "--set", "fit.gradient_accumulation=auto",
                         "--set", "runtime.memory.limit=96MiB", "--set", "fit.epochs=1",
                         "--set", "fit.steps_per_epoch=2", "--set", "fit.verbose=2")
    assert_succeeded(outcome, "fit.gradient_accumulation: auto chose")
    summary = json.loads((run / "summary.json").read_text())
    accumulation, micro_batch = summary["gradient_accumulation"], summary["micro_batch"]
    assert accumulation > 1 and micro_batch * accumulation == 2048, summary
    assert f"fit.gradient_accumulation: auto chose {accumulation}" in outcome.stdout
    assert summary["steps"] == 2
    assert summary["peak_memory_bytes"] < LIMIT, summary
    assert summary["memory"]["available_bytes"] <= LIMIT
    assert summary["memory"]["total_bytes"] <= 0.9 * summary["memory"]["available_bytes"]
    # The data set is reported apart, as host memory: at least the training images as f32.
    assert summary["peak_host_memory_bytes"] >= 60000 * 28 * 28 * 4, summary


@needs_fashion_mnist
def test_a_batch_of_65536_without_accumulation_is_refused_before_the_first_step(tmp_path):
    run = tmp_path / "run"
    outcome = run_nimbus("train", cnn_without_validation(tmp_path), "--run-dir", run,
                         "--set", "fit.batch_size=65536", "--set", "runtime.memory.limit=96MiB",
                         "--set", "fit.epochs=1")
    assert_refused(outcome, "out of memory", "a micro-batch of 60000 needs", "runtime.memory.limit 96.0 MiB on cpu:0",
                   "no gradient_accumulation up to 64", "a smaller fit.batch_size (with gradient_accumulation: auto)")
    assert "Epoch 1/" not in outcome.stdout
    assert not run.exists(), "the refused run made its run directory"


@pytest.mark.parametrize("limit, need", [
    # Below the weights: building the model is refused, with the allocation that did not fit.
    ("2MiB", "the model's weights do not fit in runtime.memory.limit 2.0 MiB on cpu:0"),
    # Above the weights, below weights + gradients + Adam's slots: the pre-run check says what they need.
    ("20MiB", "the model's parameters, gradients and optimizer state alone need 21.0 MiB"),
])
def test_a_limit_below_the_models_own_memory_is_refused_before_the_first_step(tiny, limit, need):
    # Dense(65536) over the 16 pixels: 1.4 million parameters, 5.3 MiB as f32.
    config = tiny / "wide.yaml"
    config.write_text(tiny_config(tiny, layers=["Flatten: {}", "Dense: {units: 65536}", "Dense: {units: 4}"]))
    run = tiny / "run"
    outcome = run_nimbus("train", config, "--run-dir", run, "--set", f"runtime.memory.limit={limit}")
    assert_refused(outcome, "out of memory", f"runtime.memory.limit {limit[:-3]}.0 MiB on cpu:0", need,
                   "a larger runtime.memory.limit, or a smaller model")
    assert "Epoch 1/" not in outcome.stdout
    assert not run.exists(), "the refused run made its run directory"


@pytest.mark.parametrize("limit", ["lots", "-5MiB", "0"])
def test_a_malformed_limit_is_refused_naming_the_key(tiny, limit):
    run = tiny / "run"
    outcome = run_nimbus("train", tiny / "tiny.yaml", "--run-dir", run, "--set", f"runtime.memory.limit={limit}")
    assert_refused(outcome, "runtime.memory.limit", limit)
    assert not run.exists(), "the refused run made its run directory"


def test_a_malformed_limit_in_the_environment_is_refused_naming_the_variable(tiny):
    run = tiny / "run"
    outcome = run_nimbus("train", tiny / "tiny.yaml", "--run-dir", run, env={"NIMBUS_MEMORY_LIMIT": "lots"})
    assert_refused(outcome, "NIMBUS_MEMORY_LIMIT", "lots")
    assert not run.exists(), "the refused run made its run directory"
