"""Every plan `nimbus plan` prints runs: its command passes `nimbus train --dry-run --assume-devices` on
its own hardware (issue 24), multi-GPU and multi-node plans included (the image has NCCL and MPI,
deploy/image.yaml); and a plan needing more memory than the assumed GPU has fails it. Also: what a dry run checks, that it
writes nothing, and how --assume-devices and --image-capabilities are read."""

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "reliability"))
from nimbus_process import (assert_refused, assert_succeeded, run_nimbus, snapshot, tiny_config,  # noqa: E402
                            write_tiny_dataset)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def plans(config, *flags):
    outcome = run_nimbus("plan", config, "--json", *flags, cwd=ROOT, timeout=300)
    assert_succeeded(outcome)
    return json.loads(outcome.stdout)["plans"]


def hardware(plan):
    """The --assume-devices text of the plan: GPUs of one node, NODESxGPUSxNAME on several."""
    per_node = f"{plan['device_count'] // plan['nodes']}x{plan['device']}"
    return f"{plan['nodes']}x{per_node}" if plan["nodes"] > 1 else per_node


def dry_run(plan):
    command = plan["command"]
    assert command[:2] == ["nimbus", "train"]
    flags = ["--dry-run"] + (["--assume-devices", hardware(plan)] if plan["device"] != "cpu" else [])
    with tempfile.TemporaryDirectory() as scratch:
        if plan["nodes"] > 1:  # multi_worker_mirrored's shared run directory, as nimbus k8s gives it
            flags += ["--run-dir", f"{scratch}/run"]
        return run_nimbus(*command[1:], *flags, cwd=ROOT, timeout=300)


def check_every_plan(config, *flags):
    """Runs each distinct (command, hardware) of the plans once; returns how many ran and how many of
    those replicate over several GPUs."""
    printed = plans(config, *flags)
    assert printed, "no plans"
    assert not any(p["needs"] for p in printed), "the image has what every plan needs"
    seen, replicated = set(), 0
    for plan in printed:
        key = (tuple(plan["command"]), hardware(plan))
        if key in seen:
            continue
        seen.add(key)
        several = plan["device"] != "cpu" and plan["device_count"] > 1
        replicated += several
        expected = [f"{plan['device_count']} replica(s) on GPUs"] if several else []
        assert_succeeded(dry_run(plan), "ok: a run would start", *expected)
    return len(seen), replicated


@pytest.fixture
def tiny(tmp_path):
    """A folder with write_tiny_dataset's files and a valid config for them, tiny.yaml."""
    write_tiny_dataset(tmp_path)
    (tmp_path / "tiny.yaml").write_text(tiny_config(tmp_path))
    return tmp_path


def test_every_plan_of_the_mlp_on_two_gpus_and_cpus_passes_its_dry_run():
    # The fast subset of test_dry_run_all_plans.py (every example over every catalog GPU).
    ran, replicated = check_every_plan(EXAMPLES / "fashion_mnist_mlp.yaml", "--gpus", "A10G,A100-40GB,cpu")
    assert ran >= 3 and replicated >= 1


def test_a_plan_needing_more_memory_than_the_assumed_gpu_has_fails_its_dry_run():
    # The whole training set (60000) in one micro-batch of the ResNet example on an 80 GB A100 needs about 22 GiB:
    # more than a T4's 16 GB (the CNN example's 14 GiB fit since relu's gradient fills no zero tensors).
    [plan] = [p for p in plans(EXAMPLES / "fashion_mnist_resnet.yaml", "--gpus", "A100-PCIe-80GB", "--batch", "60000",
                               "--precision", "float32") if p["device_count"] == 1]
    assert plan["micro_batch"] == 60000 and plan["memory_bytes"] > 16e9
    assert_succeeded(dry_run(plan))
    outcome = run_nimbus(*plan["command"][1:], "--dry-run", "--assume-devices", "1xT4", cwd=ROOT, timeout=300)
    assert_refused(outcome, "out of memory", "one T4 of --assume-devices", "gradient_accumulation")
    # Replicas each hold their share of the batch: on 4 T4s a quarter each fits, on 3 the batch does not
    # split evenly, as fit would refuse it.
    for hardware_text, strategy in (("4xT4", "mirrored"), ("2x2xT4", "multi_worker_mirrored")):
        with tempfile.TemporaryDirectory() as scratch:
            outcome = run_nimbus(*plan["command"][1:], "--set", f"runtime.strategy.type={strategy}", "--dry-run",
                                 "--assume-devices", hardware_text, "--run-dir", f"{scratch}/run", cwd=ROOT,
                                 timeout=300)
        assert_succeeded(outcome, f"strategy: {strategy}, 4 replica(s) on GPUs of --assume-devices",
                         "memory: batch 60000 as 1 micro-batch(es) of 15000 on each of 4 replicas")
    outcome = run_nimbus(*plan["command"][1:], "--set", "runtime.strategy.type=mirrored", "--set",
                         "fit.batch_size=60001", "--dry-run", "--assume-devices", "3xT4", cwd=ROOT, timeout=300)
    assert_refused(outcome, "fit: batch_size 60001 is not divisible by gradient_accumulation 1 x 3 replicas",
                   "use batch_size 60000 or 60003")
    # A replica's share that does not fit is refused as a whole batch on one GPU is, naming the share:
    # under a 6 GiB limit a half (about 8.5 GiB) does not fit, a quarter does.
    limited = (*plan["command"][1:], "--set", "runtime.strategy.type=mirrored", "--set", "runtime.memory.limit=6GiB",
               "--dry-run")
    outcome = run_nimbus(*limited, "--set", "runtime.strategy.devices=[cuda:0, cuda:1]", "--assume-devices", "2xT4",
                         cwd=ROOT, timeout=300)
    assert_refused(outcome, "out of memory", "one T4 of --assume-devices",
                   "a replica's share of 30000 (the batch of 60000 over 2 replicas)")
    assert_succeeded(run_nimbus(*limited, "--assume-devices", "4xT4", cwd=ROOT, timeout=300), "on each of 4 replicas")
    assert_refused(run_nimbus(*limited, "--set", "runtime.strategy.devices=[cuda:0, cuda:4]", "--assume-devices",
                              "4xT4", cwd=ROOT, timeout=300), "runtime.strategy.devices", "cuda:4")


def test_the_table_shows_each_plans_command_and_what_it_needs(tmp_path):
    outcome = run_nimbus("plan", EXAMPLES / "fashion_mnist_mlp.yaml", "--gpus", "A100-40GB", "--top", "1000",
                         cwd=ROOT)
    assert_succeeded(outcome, "nimbus train ", "--device cuda", "8 x A100-40GB", "runtime.strategy.type=mirrored")
    assert "needs:" not in outcome.stdout
    # An image without NCCL: the multi-GPU plans are marked, after every runnable one.
    image = tmp_path / "image.yaml"
    image.write_text("cuda: true\ncuda_architectures: [80, 86, 89, 90]\ncudnn: true\nnccl: false\nmpi: true\n")
    outcome = run_nimbus("plan", EXAMPLES / "fashion_mnist_mlp.yaml", "--gpus", "A100-40GB", "--top", "1000",
                         "--image-capabilities", image, cwd=ROOT)
    assert_succeeded(outcome, "needs: nccl (8 GPUs all-reduce", "1 x A100-40GB")
    lines = outcome.stdout.splitlines()
    first_needing = next(i for i, line in enumerate(lines) if "needs: nccl" in line)
    assert not any(" 1 x A100-40GB" in line for line in lines[first_needing:]), "a runnable plan after one needing NCCL"


def test_image_capabilities_decide_the_gpus_and_what_plans_need(tmp_path):
    default = plans(EXAMPLES / "fashion_mnist_mlp.yaml")
    assert not any(p["device"] in ("T4", "B200") for p in default), "the image has no sm75 or sm100 code"
    image = tmp_path / "image.yaml"
    image.write_text("cuda: true\ncuda_architectures: [75, 80, 86, 89, 90]\ncudnn: true\nnccl: true\nmpi: true\n")
    with_nccl = plans(EXAMPLES / "fashion_mnist_mlp.yaml", "--image-capabilities", image)
    assert any(p["device"] == "T4" for p in with_nccl)
    assert all(not p["needs"] for p in with_nccl)
    image.write_text("cuda: true\ncuda_architectures: [80]\ncudnn: true\nnccl: false\nmpi: true\nnvlink: true\n")
    assert_refused(run_nimbus("plan", EXAMPLES / "fashion_mnist_mlp.yaml", "--image-capabilities", image, cwd=ROOT),
                   f"{image}:6: unknown key 'nvlink'")


def test_a_dry_run_checks_what_a_run_checks_and_writes_nothing(tiny):
    before = snapshot(tiny)
    entries = sorted(os.listdir(tiny))
    outcome = run_nimbus("train", tiny / "tiny.yaml", "--dry-run", "--run-dir", tiny / "run", "--summary",
                         tiny / "summary.json", cwd=tiny)
    assert_succeeded(outcome, "data.train: x [64, 4, 4, 1] f32, y [64] u8", "memory: batch 16", "nothing written")
    assert sorted(os.listdir(tiny)) == entries and snapshot(tiny) == before
    # The run's own validation refuses the same configs, with the same words.
    for flag in ("fit.batch_size=-5", "fit.gradient_accumulation=3"):
        dry = run_nimbus("train", tiny / "tiny.yaml", "--set", flag, "--dry-run", cwd=tiny)
        real = run_nimbus("train", tiny / "tiny.yaml", "--set", flag, "--run-dir", tiny / "run", cwd=tiny)
        assert_refused(dry, flag.split("=")[0])
        assert_refused(real, flag.split("=")[0])
        assert dry.stderr == real.stderr
    assert sorted(os.listdir(tiny)) == entries


def test_a_dry_run_reads_only_the_data_files_headers(tiny):
    # The header says 64 images; the pixels are cut off: a run would fail reading them, a dry run does not.
    images = tiny / "images.idx"
    images.write_bytes(images.read_bytes()[:100])
    assert_succeeded(run_nimbus("train", tiny / "tiny.yaml", "--dry-run", cwd=tiny), "x [64, 4, 4, 1]")
    assert_refused(run_nimbus("train", tiny / "tiny.yaml", "--dry-run", "--set",
                              f"data.train.labels={tiny}/missing.idx", cwd=tiny), "missing.idx")


def test_assume_devices_reads_the_catalog_and_checks_the_device_and_precision(tiny):
    config = tiny / "tiny.yaml"
    cuda = ("--set", "runtime.device=cuda")
    assert_succeeded(run_nimbus("train", config, *cuda, "--dry-run", "--assume-devices", "4xA100-80GB"),
                     "4 x A100-SXM4-80GB (80.0 GB each, compute capability 8.0)")
    assert_succeeded(run_nimbus("train", config, "--set", "runtime.device=cuda:1", "--dry-run", "--assume-devices",
                                "2×H100"), "cuda:1 of --assume-devices 2 x H100-SXM5-80GB")
    assert_refused(run_nimbus("train", config, "--set", "runtime.device=cuda:2", "--dry-run", "--assume-devices",
                              "2xH100"), "cuda:2", "cuda:0 to cuda:1")
    assert_refused(run_nimbus("train", config, *cuda, "--set", "runtime.precision=mixed_bfloat16", "--dry-run",
                              "--assume-devices", "1xT4"), "mixed_bfloat16", "T4")
    assert_refused(run_nimbus("train", config, *cuda, "--dry-run", "--assume-devices", "2xA100-90GB"),
                   "unknown GPU 'A100-90GB'", "close catalog names: A100-40GB", "A100-80GB")
    assert_refused(run_nimbus("train", config, *cuda, "--dry-run", "--assume-devices", "two A100"), "COUNTxGPU")
    assert_refused(run_nimbus("train", config, *cuda, "--dry-run", "--assume-devices", "1xV100-16GB"),
                   "does not target", "7.0")
    assert_refused(run_nimbus("train", config, *cuda, "--assume-devices", "1xA100-80GB", "--run-dir", tiny / "run"),
                   "without --dry-run")
    assert not (tiny / "run").exists()
