"""Hostile command-line flags of every subcommand (nimbus --help lists them): out of range, negative,
zero, huge, non-numeric, empty, missing files. Each is refused cleanly with a message naming the flag
or the file, the value and what to give instead; none crashes, hangs or is silently ignored."""

import re
import time

import pytest

from nimbus_process import assert_refused, assert_succeeded, run_nimbus

# A model given by totals: plan and k8s need no config for it.
TOTALS = ["--params", "1e6", "--flops-per-sample", "1e7", "--samples", "1000", "--batch", "64"]


def assert_plain(outcome):
    """No CLI11 bound spelled out in 300 digits, no yaml-cpp text, no conversion error."""
    message = outcome.stderr + outcome.stdout
    assert not re.search(r"\d{25}", message), "a huge number is spelled out:\n" + outcome.describe()
    for leak in ("yaml-cpp", "operator[]", "Could not convert", "filesystem error"):
        assert leak not in message, f"library text {leak!r} leaks:\n" + outcome.describe()


# (arguments, culprits the message must name); "{tiny}" is the tiny config, "{dir}" the test's folder.
REFUSED = {
    # plan: every numeric flag, and the overflow that was a SIGFPE
    "plan --max-nodes huge (was SIGFPE)": (["plan", *TOTALS, "--max-nodes", "536870912"],
                                           ["--max-nodes", "536870912", "1 to 1024"]),
    "plan --max-nodes 1e999": (["plan", *TOTALS, "--max-nodes", "1e999"], ["--max-nodes", "1e999", "whole number"]),
    "plan --max-nodes 0": (["plan", *TOTALS, "--max-nodes", "0"], ["--max-nodes", "'0'"]),
    "plan --samples negative (was ignored)": (["plan", "{tiny}", "--samples", "-100"], ["--samples", "-100"]),
    "plan --epochs negative (was ignored)": (["plan", "{tiny}", "--epochs", "-3"], ["--epochs", "-3"]),
    "plan --batch 0 (was ignored)": (["plan", "{tiny}", "--batch", "0"], ["--batch", "'0'"]),
    "plan --batch empty": (["plan", "{tiny}", "--batch", ""], ["--batch", "empty"]),
    "plan --samples non-numeric": (["plan", "{tiny}", "--samples", "many"], ["--samples", "many", "whole number"]),
    "plan --params negative (was 'needs a model')": (["plan", "--params", "-5", "--flops-per-sample", "1e7"],
                                                      ["--params", "-5", "above 0"]),
    "plan --params nan": (["plan", "--params", "nan", "--flops-per-sample", "1e7"], ["--params", "nan"]),
    "plan --params without --flops-per-sample": (["plan", "--params", "1e6"], ["--params", "--flops-per-sample"]),
    "plan totals and a config": (["plan", "{tiny}", "--params", "1e6", "--flops-per-sample", "1e7"],
                                 ["--params", "config"]),
    "plan --set without a config": (["plan", *TOTALS, "--set", "fit.epochs=3"], ["--set"]),
    "plan --top huge": (["plan", *TOTALS, "--top", "1e400"], ["--top", "1e400"]),
    "plan --deadline 0": (["plan", *TOTALS, "--deadline", "0h"], ["--deadline", "0h"]),
    "plan --budget words": (["plan", *TOTALS, "--budget", "lots"], ["--budget", "lots"]),
    "plan --clouds unknown": (["plan", *TOTALS, "--clouds", "nowhere"], ["nowhere", "aws"]),
    "plan --profile without --local": (["plan", *TOTALS, "--profile", "{dir}/p.json"], ["--profile", "--local"]),
    "plan --local with a missing profile": (["plan", *TOTALS, "--local", "--profile", "{dir}/none.json"],
                                            ["none.json", "nimbus bench"]),
    "plan --catalog missing": (["plan", *TOTALS, "--catalog", "{dir}/missing.yaml"], ["missing.yaml"]),
    "plan --catalog not a mapping (leaked yaml-cpp)": (["plan", *TOTALS, "--catalog", "{dir}/scalar.yaml"],
                                                       ["scalar.yaml:1", "mapping"]),
    "plan --catalog bad YAML": (["plan", *TOTALS, "--catalog", "{dir}/broken.yaml"], ["broken.yaml:4", "not valid YAML"]),
    "plan --catalog unknown section": (["plan", *TOTALS, "--catalog", "{dir}/typo.yaml"],
                                       ["typo.yaml:1", "'gpu'"]),
    "plan --catalog gpu_count 0": (["plan", *TOTALS, "--catalog", "{dir}/zero_gpus.yaml"],
                                   ["zero_gpus.yaml:9", "gpu_count"]),
    "plan --catalog NaN price": (["plan", *TOTALS, "--catalog", "{dir}/nan_price.yaml"],
                                 ["nan_price.yaml:14", "on_demand_usd_per_hour"]),
    # k8s: what was written into manifests
    "k8s --storage lots": (["k8s", *TOTALS, "--storage", "lots"], ["--storage", "lots", "100Gi"]),
    "k8s --storage 0Gi": (["k8s", *TOTALS, "--storage", "0Gi"], ["--storage", "0Gi"]),
    "k8s --metrics-port 99999": (["k8s", *TOTALS, "--metrics-port", "99999"], ["--metrics-port", "99999", "65535"]),
    "k8s --metrics-port 0": (["k8s", *TOTALS, "--metrics-port", "0"], ["--metrics-port", "'0'"]),
    "k8s --plan 0": (["k8s", *TOTALS, "--plan", "0"], ["--plan", "'0'"]),
    "k8s --plan past the last": (["k8s", *TOTALS, "--plan", "999999"], ["no plan 999999"]),
    "k8s --storage-class with spaces": (["k8s", *TOTALS, "--storage-class", "Fast Disks"], ["--storage-class"]),
    "k8s --image with spaces": (["k8s", *TOTALS, "--image", "nimbus; rm -rf /"], ["--image"]),
    "k8s --name invalid": (["k8s", *TOTALS, "--name", "My_Job"], ["My_Job"]),
    "k8s -o empty (was the manifests printed)": (["k8s", *TOTALS, "-o", ""], ["--output", "empty"]),
    "k8s -o under a file": (["k8s", *TOTALS, "-o", "{dir}/scalar.yaml/out"], ["-o", "scalar.yaml/out"]),
    # train
    "train --metrics-port 99999": (["train", "{tiny}", "--metrics-port", "99999", "--run-dir", "{dir}/run"],
                                   ["--metrics-port", "99999", "0 picks a free port"]),
    "train --metrics-port -1": (["train", "{tiny}", "--metrics-port", "-1", "--run-dir", "{dir}/run"],
                                ["--metrics-port", "-1"]),
    "train --metrics-linger nan": (["train", "{tiny}", "--metrics-linger", "nan", "--run-dir", "{dir}/run"],
                                   ["--metrics-linger", "nan"]),
    "train --run-dir empty (was runs/<date-time>)": (["train", "{tiny}", "--run-dir", ""], ["--run-dir", "empty"]),
    "train --resume empty (was a new run)": (["train", "{tiny}", "--resume", ""], ["--resume", "empty"]),
    "train --summary empty (was ignored)": (["train", "{tiny}", "--summary", "", "--run-dir", "{dir}/run"],
                                            ["--summary", "empty"]),
    "train --metrics-address empty": (["train", "{tiny}", "--metrics-port", "0", "--metrics-address", "",
                                       "--run-dir", "{dir}/run"], ["--metrics-address", "empty"]),
    "--threads negative": (["--threads", "-2", "info"], ["--threads", "-2", "0 to 4096"]),
    "--threads huge": (["--threads", "99999999999999999999999", "ops"], ["--threads", "out of range"]),
    # evaluate and predict
    "evaluate --batch-size 0": (["evaluate", "{run}", "--batch-size", "0"], ["--batch-size", "'0'"]),
    "evaluate --batch-size huge": (["evaluate", "{run}", "--batch-size", "1e12"], ["--batch-size", "1e12"]),
    "evaluate a missing run": (["evaluate", "{dir}/no-such-run"], ["no-such-run"]),
    "evaluate --checkpoint empty": (["evaluate", "{run}", "--checkpoint", ""], ["--checkpoint", "empty"]),
    "evaluate --images empty": (["evaluate", "{run}", "--images", ""], ["--images", "empty"]),
    "evaluate an empty source": (["evaluate", ""], ["source", "empty"]),
    "predict --config empty": (["predict", "{run}", "-o", "{dir}/p.npy", "--config", ""], ["--config", "empty"]),
    "evaluate --split unknown": (["evaluate", "{run}", "--split", "test"], ["--split", "test"]),
    "predict --scale nan": (["predict", "{run}", "-o", "{dir}/p.npy", "--scale", "nan"], ["--scale", "nan"]),
    "predict --output unknown format": (["predict", "{run}", "-o", "{dir}/p.csv"], ["--output", "p.csv"]),
    # data
    "data to-tfrecord --shards 0": (["data", "to-tfrecord", "-o", "{dir}/shards", "--shards", "0"],
                                    ["--shards", "'0'"]),
    "data to-tfrecord --shards huge": (["data", "to-tfrecord", "-o", "{dir}/shards", "--shards", "10000000"],
                                       ["--shards", "10000000"]),
    "data to-tfrecord --source-dir missing": (["data", "to-tfrecord", "-o", "{dir}/shards", "--source-dir",
                                               "{dir}/no-idx"], ["no-idx"]),
    # dmon
    "dmon -d 0": (["dmon", "-d", "0", "--url", "http://127.0.0.1:1/metrics"], ["-d", "'0'", "above 0"]),
    "dmon -d inf": (["dmon", "-d", "inf", "--url", "http://127.0.0.1:1/metrics"], ["-d", "inf"]),
    "dmon -c negative": (["dmon", "-c", "-1", "--url", "http://127.0.0.1:1/metrics"], ["-c", "-1"]),
    "dmon -i not an index": (["dmon", "-i", "0,x1", "--url", "http://127.0.0.1:1/metrics"], ["-i", "x1"]),
    "dmon -o unknown": (["dmon", "-o", "Q", "--url", "http://127.0.0.1:1/metrics"], ["-o", "Q"]),
    "dmon -s unknown": (["dmon", "-s", "z", "--url", "http://127.0.0.1:1/metrics"], ["-s", "z"]),
    "dmon --url nobody serves": (["dmon", "-c", "1", "--url", "http://127.0.0.1:1/metrics"], ["127.0.0.1:1"]),
    # doctor, report
    "doctor a missing run": (["doctor", "{dir}/no-such-run"], ["no-such-run"]),
    "doctor --url not http": (["doctor", "--url", "ftp://127.0.0.1/metrics"], ["ftp://127.0.0.1/metrics"]),
    "doctor neither a run nor --url": (["doctor"], ["--url"]),
    "report a missing run": (["report", "{dir}/no-such-run"], ["no-such-run"]),
    "report -o empty (was RUN_DIR/report.html)": (["report", "{run}", "-o", ""], ["--output", "empty"]),
    # info, ops, bench
    "info with an unknown flag": (["info", "--verbose"], ["--verbose"]),
    "ops with an extra argument": (["ops", "everything"], ["everything"]),
    "bench --profile under a file": (["bench", "--profile", "{dir}/scalar.yaml/profile.json"],
                                     ["scalar.yaml/profile.json"]),
}

CATALOGS = {
    "scalar.yaml": "just some text\n",
    "broken.yaml": "gpus:\n  - name: [\n\n",
    "typo.yaml": "gpu:\n  - name: X\n",
    "zero_gpus.yaml": "\n".join([
        "instances:",
        "  - cloud: aws",
        "    name: zero.gpus",
        "    gpu: T4",
        "    vcpus: 4",
        "    ram_gb: 16",
        "    region: us-east-1",
        "    on_demand_usd_per_hour: 1",
        "    gpu_count: 0",
        "    network_gbps: 10",
        "    source: test",
        "    as_of: 2025-01-01",
        ""]),
    "nan_price.yaml": "\n".join([
        "instances:",
        "  - cloud: aws",
        "    name: nan.price",
        "    gpu: T4",
        "    gpu_count: 1",
        "    vcpus: 4",
        "    ram_gb: 16",
        "    region: us-east-1",
        "    network_gbps: 10",
        "    source: test",
        "    as_of: 2025-01-01",
        "",
        "",
        "    on_demand_usd_per_hour: .nan",
        ""]),
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny trained run (for evaluate and predict) and the folder it lives in."""
    from nimbus_process import tiny_config, write_tiny_dataset
    folder = tmp_path_factory.mktemp("trained")
    write_tiny_dataset(folder)
    (folder / "tiny.yaml").write_text(tiny_config(folder))
    assert_succeeded(run_nimbus("train", folder / "tiny.yaml", "--run-dir", folder / "run"))
    return folder


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_hostile_flag_is_refused_by_name(case, tiny, trained):
    for name, text in CATALOGS.items():
        (tiny / name).write_text(text)
    arguments, culprits = REFUSED[case]
    fill = {"tiny": str(tiny / "tiny.yaml"), "dir": str(tiny), "run": str(trained / "run")}
    outcome = run_nimbus(*[a.format(**fill) for a in arguments], cwd=tiny)
    assert_refused(outcome, *[c.format(**fill) for c in culprits])
    assert_plain(outcome)


def test_a_refused_train_flag_leaves_no_run_directory(tiny):
    outcome = run_nimbus("train", tiny / "tiny.yaml", "--metrics-port", "70000", "--run-dir", tiny / "run")
    assert_refused(outcome, "--metrics-port", "70000")
    assert not (tiny / "run").exists()


def test_plan_flags_win_over_the_config(tiny):
    outcome = run_nimbus("plan", tiny / "tiny.yaml", "--samples", "5000", "--epochs", "7", "--batch", "32")
    assert_succeeded(outcome, "5000 samples x 7 epochs, batch 32")


def test_a_config_with_negative_epochs_is_refused_by_plan(tiny):
    (tiny / "bad.yaml").write_text((tiny / "tiny.yaml").read_text().replace("epochs: 2", "epochs: -1"))
    outcome = run_nimbus("plan", tiny / "bad.yaml")
    assert_refused(outcome, "epochs")


def test_a_huge_prime_batch_plans_quickly():
    # Every accumulation up to the per-device batch was tried: a billion trials per device.
    started = time.monotonic()
    outcome = run_nimbus("plan", "--params", "1e12", "--flops-per-sample", "1e7", "--samples", "1000", "--batch",
                         "1073741789")
    assert_succeeded(outcome, "no device in the catalog fits")
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("command", ["evaluate", "predict"])
def test_a_run_without_checkpoints_does_not_speak_of_resume(command, trained, tmp_path):
    import shutil
    run = tmp_path / "killed-run"
    shutil.copytree(trained / "run", run)
    for checkpoint in (run / "checkpoints").iterdir():
        checkpoint.unlink()
    outcome = run_nimbus(command, run, *(["-o", tmp_path / "p.npy"] if command == "predict" else []))
    assert_refused(outcome, "checkpoints", "--checkpoint")
    assert "--resume" not in outcome.stderr + outcome.stdout, outcome.describe()


def test_k8s_writes_a_valid_storage_and_port(tmp_path):
    outcome = run_nimbus("k8s", *TOTALS, "--storage", "150Gi", "--metrics-port", "9500")
    assert_succeeded(outcome, "storage: 150Gi", "containerPort: 9500")
