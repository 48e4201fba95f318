"""Device selection from the command line: runtime.device defaults to auto, which takes a GPU when the
build and machine have one and the CPU otherwise, and says which and why (the run's first line,
summary.json, nimbus info); --device on train, evaluate and predict overrides it; a device the machine
or build lacks, or text that names no device, is refused naming the flag, never a crash.

On a machine without a GPU (CI, this project's build machines) auto must take the CPU; where a GPU is
present the cases that need its absence skip, saying so."""

import json
import re

import pytest

from nimbus_process import assert_refused, assert_succeeded, run_nimbus


def info_lines():
    outcome = run_nimbus("info")
    assert_succeeded(outcome, "default training device: ")
    return outcome.stdout.splitlines()


def default_device_line():
    """What nimbus info says a run takes by default: "cpu:0 (auto: ...)"."""
    prefix = "default training device: "
    return next(line[len(prefix):] for line in info_lines() if line.startswith(prefix))


def gpu_present():
    return not any(line.startswith("cuda: not available: ") for line in info_lines())


def train(tiny, *flags):
    run_dir = tiny / "run"
    return run_nimbus("train", tiny / "tiny.yaml", "--run-dir", run_dir, *flags, cwd=tiny), run_dir


def test_info_says_why_there_is_no_gpu():
    if gpu_present():
        pytest.skip("a GPU is present: nimbus info lists it instead")
    lines = info_lines()
    assert lines[0].startswith("cpu:0: "), lines
    (why,) = [line for line in lines if line.startswith("cuda: not available: ")]
    # A CPU-only build, or a CUDA build on a machine without the driver library or GPU.
    assert re.search(r"this build has no CUDA backend|no NVIDIA driver: libcuda|NVIDIA driver", why), why
    assert default_device_line().startswith("cpu:0 (auto: "), lines


def test_auto_is_the_default_and_the_first_line_says_what_it_took(tiny):
    outcome, run_dir = train(tiny)
    assert_succeeded(outcome)
    expected = default_device_line()
    assert outcome.stdout.splitlines()[0] == "device: " + expected, outcome.describe()
    if not gpu_present():
        assert expected.startswith("cpu:0 (auto: "), expected
    assert json.loads((run_dir / "config.json").read_text())["runtime"]["device"] == "auto"


def test_summary_names_the_device_and_its_memory(tiny):
    outcome, run_dir = train(tiny)
    assert_succeeded(outcome)
    summary = json.loads((run_dir / "summary.json").read_text())
    device, reason = re.fullmatch(r"(\S+) \((.*)\)", default_device_line()).groups()
    assert summary["device"] == device
    assert summary["device_reason"] == reason
    assert summary["device_count"] == 1
    assert len(summary["device_names"]) == 1 and summary["device_names"][0], summary["device_names"]
    # The model's device memory (the allocator's peak), the host data set's, and the process's resident peak.
    for key in ("peak_memory_bytes", "peak_host_memory_bytes", "host_peak_rss_bytes"):
        assert isinstance(summary[key], int) and summary[key] > 0, (key, summary[key])
    assert summary["host_peak_rss_bytes"] > summary["peak_host_memory_bytes"]


def test_device_cpu_trains_on_the_cpu(tiny):
    outcome, run_dir = train(tiny, "--device", "cpu")
    assert_succeeded(outcome)
    assert outcome.stdout.splitlines()[0] == "device: cpu:0 (runtime.device: cpu)", outcome.describe()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["device"] == "cpu:0"
    assert json.loads((run_dir / "config.json").read_text())["runtime"]["device"] == "cpu"


def test_device_cuda_without_a_gpu_is_a_clear_error(tiny):
    if gpu_present():
        pytest.skip("a GPU is present: --device cuda trains on it")
    outcome, run_dir = train(tiny, "--device", "cuda")
    assert_refused(outcome, "unavailable", "--device: cuda: ")
    assert re.search(r"this build has no CUDA backend|no NVIDIA driver|NVIDIA driver",
                     outcome.stderr), outcome.describe()
    assert not run_dir.exists(), "a refused run wrote its directory"


@pytest.mark.parametrize("value", ["tpu", "CUDA", "cuda:", "cuda:-1", "cuda:x", "gpu", "", "cpu cuda"])
def test_a_bad_device_is_refused_naming_the_flag_and_the_forms(tiny, value):
    outcome, run_dir = train(tiny, "--device", value)
    assert_refused(outcome, "--device", f"'{value}'", "auto", "cpu", "cuda:N")
    assert not run_dir.exists()


@pytest.fixture
def trained_run(tiny):
    outcome, run_dir = train(tiny, "--device", "cpu")
    assert_succeeded(outcome)
    return run_dir


@pytest.mark.parametrize("command", ["evaluate", "predict"])
def test_evaluate_and_predict_take_device(trained_run, tmp_path, command):
    output = ["--output", tmp_path / "p.npy"] if command == "predict" else []
    ran = run_nimbus(command, trained_run, "--device", "cpu", *output)
    assert_succeeded(ran)
    assert ran.stdout.splitlines()[0] == "device: cpu:0 (runtime.device: cpu)", ran.describe()
    refused = run_nimbus(command, trained_run, "--device", "tpu", *output)
    assert_refused(refused, "--device", "'tpu'", "cuda:N")


def test_evaluate_json_prints_the_scores_alone(trained_run):
    ran = run_nimbus("evaluate", trained_run, "--device", "cpu", "--json")
    assert_succeeded(ran)
    assert set(json.loads(ran.stdout)) == {"loss", "accuracy"}, ran.describe()


def test_a_run_recorded_on_a_gpu_evaluates_here_with_device_cpu(trained_run):
    if gpu_present():
        pytest.skip("a GPU is present: the recorded device exists here")
    config_path = trained_run / "config.json"
    config = json.loads(config_path.read_text())
    config["runtime"]["device"] = "cuda"
    config_path.write_text(json.dumps(config))
    assert_refused(run_nimbus("evaluate", trained_run, "--json"), "runtime.device: cuda: ")
    assert_refused(run_nimbus("evaluate", trained_run, "--device", "cuda", "--json"), "--device: cuda: ")
    assert_succeeded(run_nimbus("evaluate", trained_run, "--device", "cpu", "--json"), "loss")
