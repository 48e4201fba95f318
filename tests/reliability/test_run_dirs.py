"""Run directories: never a lost or mixed run (docs/training.md, "Run directories").

Each case runs real nimbus processes. A start that fails, or that finds the directory holding another
run, leaves every file that was there byte for byte unchanged; --overwrite moves the old run aside,
intact; --resume continues the run that is there.
"""

import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

from nimbus_process import (_limit_address_space, assert_refused, assert_succeeded, assert_unchanged,
                            nimbus_binary, run_nimbus, snapshot, tiny_config)

LONG_FIT = "{epochs: 100000, batch_size: 16, verbose: 0}"


def trained_run(tiny, name="run", *extra):
    """A finished run of tiny.yaml in tiny/name: checkpoints at steps 4 and 8, and best.safetensors."""
    run = tiny / name
    assert_succeeded(run_nimbus("train", tiny / "tiny.yaml", "--run-dir", run, *extra), "samples/s")
    return run


def start_nimbus(*args, cwd=None):
    """nimbus in the background, under the suite's address-space limit (the caller ends it)."""
    return subprocess.Popen([nimbus_binary(), *map(str, args)], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_limit_address_space)


def wait_for(condition, process, seconds=60):
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, f"nimbus ended early: {process.communicate()}"
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def long_config(tiny):
    """tiny.yaml training for ever, a checkpoint every 20 steps (no best.safetensors: the newest is a ckpt-*)."""
    path = tiny / "long.yaml"
    path.write_text(tiny_config(tiny, fit=LONG_FIT, extra="checkpoint: {save_freq: 20, max_to_keep: 2, save_best: false}\n"))
    return path


def moved_aside(tiny, name="run"):
    return sorted(p for p in tiny.iterdir() if p.name.startswith(name + ".replaced-"))


def test_a_bad_config_into_a_good_run_dir_changes_nothing(tiny):
    run = trained_run(tiny)
    before = snapshot(run)
    bad = tiny / "BAD.yaml"
    bad.write_text(tiny_config(tiny, fit="{epochs: 2, batch_size: -5, verbose: 0}"))
    # The config loader refuses batch_size -5, in the file or in --set, before the run directory is claimed.
    for config, culprit in (([bad], f"{bad}:"), ([tiny / "tiny.yaml", "--set", "fit.batch_size=-5"], "--set")):
        for start in ([], ["--overwrite"], ["--resume", run]):
            outcome = run_nimbus("train", *config, "--run-dir", run, *start)
            assert_refused(outcome, culprit, "fit.batch_size is -5")
            assert_unchanged(before, run)
            assert moved_aside(tiny) == [], "a refused --overwrite moved the run aside"
    assert_succeeded(run_nimbus("train", "--resume", run), "samples/s")


def test_a_second_run_into_an_existing_run_dir_is_refused(tiny):
    run = trained_run(tiny)
    before = snapshot(run)
    outcome = run_nimbus("train", tiny / "tiny.yaml", "--run-dir", run, "--set", "fit.epochs=1")
    assert_refused(outcome, str(run), "--overwrite", "--resume")
    assert_unchanged(before, run)


def test_overwrite_moves_the_old_run_aside_and_evaluate_scores_the_new_model(tiny):
    run = trained_run(tiny)
    before = snapshot(run)
    outcome = run_nimbus("train", tiny / "tiny.yaml", "--run-dir", run, "--set", "fit.epochs=1", "--overwrite")
    assert_succeeded(outcome, "samples/s")
    [old] = moved_aside(tiny)
    assert snapshot(old) == before, "the old run was not moved aside intact"
    assert old.name in outcome.stdout + outcome.stderr, "the move was not said"
    checkpoints = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert checkpoints == ["best.safetensors", "ckpt-00000004.safetensors"], checkpoints
    # evaluate scores the new run's model: its final val_loss, on the same validation data.
    val_loss = json.loads((run / "summary.json").read_text())["final"]["val_loss"]
    assert_succeeded(run_nimbus("evaluate", run), f"loss: {val_loss:.4f}", f"weights from {run}/checkpoints/")
    # --resume continues the new run (its step 4), not the old run's newer step 8.
    assert_succeeded(run_nimbus("train", "--resume", run, "--set", "fit.epochs=2"), "(global step 4)")


def test_predict_output_onto_the_runs_own_files_is_refused(tiny):
    run = trained_run(tiny)
    other = trained_run(tiny, "other")
    before, before_other = snapshot(run), snapshot(other)
    for output in (run / "checkpoints" / "best.safetensors", run / "checkpoints" / "ckpt-00000008.safetensors",
                   run / "checkpoints" / ".." / "checkpoints" / "best.safetensors",
                   other / "checkpoints" / "ckpt-00000004.safetensors", run / "checkpoints" / "new.npy"):
        outcome = run_nimbus("predict", run, "-o", output)
        assert_refused(outcome, str(output), "--output")
        assert_unchanged(before, run)
        assert_unchanged(before_other, other)
    assert_succeeded(run_nimbus("predict", run, "-o", tiny / "predictions.npy"), "predictions")


def test_report_and_summary_outputs_onto_a_runs_files_are_refused(tiny):
    run = trained_run(tiny)
    before = snapshot(run)
    outcome = run_nimbus("report", run, "-o", run / "metrics.jsonl")
    assert_refused(outcome, str(run / "metrics.jsonl"))
    outcome = run_nimbus("train", tiny / "tiny.yaml", "--run-dir", tiny / "new", "--summary", run / "config.json")
    assert_refused(outcome, str(run / "config.json"), "--summary")
    assert not (tiny / "new").exists(), "the refused run made its directory"
    assert_unchanged(before, run)


def test_a_new_run_inside_another_runs_folders_is_refused(tiny):
    # It would write among that run's files, and --overwrite would move its checkpoints aside.
    run = trained_run(tiny)
    before = snapshot(run)
    for inside in (run / "checkpoints", run / "tensorboard", run / "checkpoints" / "new"):
        for start in ([], ["--overwrite"]):
            outcome = run_nimbus("train", tiny / "tiny.yaml", "--run-dir", inside, *start)
            assert_refused(outcome, f"--run-dir {inside}", "outside the run's own files")
            assert_unchanged(before, run)
            assert not (run / "checkpoints" / "new").exists()
            assert not list(run.glob("*.replaced-*")), "a folder of the run was moved aside"


def test_a_taken_metrics_port_is_refused_before_the_run_dir_is_made(tiny):
    run = trained_run(tiny)
    before = snapshot(run)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        outcome = run_nimbus("train", tiny / "tiny.yaml", "--run-dir", tiny / "new", "--metrics-port", port)
        assert_refused(outcome, port)
        assert not (tiny / "new").exists(), "the run directory was made before the port was found taken"
        outcome = run_nimbus("train", "--resume", run, "--metrics-port", port)
        assert_refused(outcome, port)
        assert_unchanged(before, run)


def test_a_second_nimbus_on_a_claimed_run_dir_is_refused_naming_the_holder(tiny):
    run = tiny / "run"
    first = start_nimbus("train", long_config(tiny), "--run-dir", run)
    try:
        wait_for(lambda: list((run / "checkpoints").glob("ckpt-*")), first)
        for start in (["--resume", run], ["--overwrite"]):
            outcome = run_nimbus("train", tiny / "tiny.yaml", "--run-dir", run, *start)
            assert_refused(outcome, str(run), str(first.pid))
            assert moved_aside(tiny) == [], "a run in use was moved aside"
        assert first.poll() is None, "the first run stopped"
    finally:
        first.kill()
        first.communicate()
    # The kernel released the killed process's claim: the run resumes.
    assert_succeeded(run_nimbus("train", "--resume", run, "--set", "fit.epochs=1"), "Resuming from")


def test_a_killed_run_resumes_from_its_checkpoint(tiny):
    run = tiny / "run"
    first = start_nimbus("train", long_config(tiny), "--run-dir", run)
    try:
        wait_for(lambda: len(list((run / "checkpoints").glob("ckpt-*"))) >= 2, first)
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate()
    checkpoints = snapshot(run / "checkpoints")
    # A kill -9 can tear metrics.jsonl's last line; the resume drops it.
    with open(run / "metrics.jsonl", "a") as metrics:
        metrics.write('{"type":"step","epoch":9,"st')
    outcome = run_nimbus("train", "--resume", run, "--set", "fit.epochs=60")
    assert_succeeded(outcome, "Resuming from")
    # (A kill during a save leaves its temporary file beside the checkpoints: not a checkpoint.)
    newest = max(int(found.group(1)) for found in map(re.compile(r"ckpt-(\d+)\.safetensors").fullmatch, checkpoints)
                 if found)
    assert f"(global step {newest})" in outcome.stdout, outcome.describe()


def torn_run(tiny):
    run = trained_run(tiny)
    with open(run / "metrics.jsonl", "a") as metrics:
        metrics.write('{"type":"step","epoch":2,"step":9,"ti')
    return run


def test_doctor_reads_a_metrics_log_with_a_torn_last_line(tiny):
    run = torn_run(tiny)
    before = snapshot(run)
    outcome = run_nimbus("doctor", run)
    assert outcome.returncode in (0, 2), outcome.describe()  # 2: findings
    assert "nimbus doctor: " in outcome.stdout, outcome.describe()
    assert "metrics.jsonl" in outcome.stderr and "torn" in outcome.stderr, outcome.describe()
    assert_unchanged(before, run)


def test_report_reads_a_metrics_log_with_a_torn_last_line(tiny):
    run = torn_run(tiny)
    before = snapshot(run)
    outcome = run_nimbus("report", run, "-o", tiny / "report.html")
    assert_succeeded(outcome, "wrote")
    assert "metrics.jsonl" in outcome.stderr and "torn" in outcome.stderr, outcome.describe()
    assert (tiny / "report.html").stat().st_size > 0
    assert_unchanged(before, run)


def test_a_torn_line_in_the_middle_is_still_refused(tiny):
    run = trained_run(tiny)
    lines = (run / "metrics.jsonl").read_text().splitlines(keepends=True)
    (run / "metrics.jsonl").write_text("".join(lines[:2]) + '{"type":"st\n' + "".join(lines[2:]))
    outcome = run_nimbus("doctor", run)
    assert_refused(outcome, "metrics.jsonl:3")


def half_made_run(tiny):
    """A run killed before its first checkpoint: config.json and metrics.jsonl, no checkpoint."""
    run = trained_run(tiny)
    for checkpoint in (run / "checkpoints").iterdir():
        checkpoint.unlink()
    return run


def test_resume_on_a_half_made_run_dir_starts_from_step_zero(tiny):
    run = half_made_run(tiny)
    config = (run / "config.json").read_bytes()
    outcome = run_nimbus("train", tiny / "tiny.yaml", "--resume", run)
    assert_succeeded(outcome, "step 0")
    assert (run / "config.json").read_bytes() == config
    assert sorted(p.name for p in (run / "checkpoints").iterdir())[-1] == "ckpt-00000008.safetensors"
    steps = [line for line in (run / "metrics.jsonl").read_text().splitlines() if '"type":"step"' in line]
    assert len(steps) == 8, "the half-made run's step lines were kept"


def test_resume_on_a_half_made_run_dir_with_another_config_is_refused(tiny):
    run = half_made_run(tiny)
    before = snapshot(run)
    outcome = run_nimbus("train", tiny / "tiny.yaml", "--resume", run, "--set", "fit.batch_size=8")
    assert_refused(outcome, str(run), "batch_size", "--overwrite")
    assert_unchanged(before, run)


def test_resume_on_a_folder_that_holds_no_run_is_refused(tiny):
    (tiny / "empty").mkdir()
    outcome = run_nimbus("train", tiny / "tiny.yaml", "--resume", tiny / "empty")
    assert_refused(outcome, str(tiny / "empty"), "config.json")
    assert list((tiny / "empty").iterdir()) == []
    outcome = run_nimbus("train", "--resume", tiny / "missing")
    assert_refused(outcome, str(tiny / "missing"))
    assert not (tiny / "missing").exists()


def test_resume_and_overwrite_together_are_refused(tiny):
    run = trained_run(tiny)
    before = snapshot(run)
    outcome = run_nimbus("train", "--resume", run, "--overwrite")
    assert_refused(outcome, "--resume", "--overwrite")
    assert_unchanged(before, run)
    assert moved_aside(tiny) == []


def test_a_refused_start_makes_no_default_run_dir(tiny):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        outcome = run_nimbus("train", tiny / "tiny.yaml", "--metrics-port", port, cwd=tiny)
    assert_refused(outcome, port)
    assert not (tiny / "runs").exists(), "a refused start made runs/<date-time>"


def test_a_fresh_start_into_a_folder_without_a_run_is_allowed(tiny):
    """A pod killed between claiming its folder and writing config.json leaves only the lock file."""
    (tiny / "run").mkdir()
    (tiny / "run" / "notes.txt").write_text("mine")
    before = snapshot(tiny / "run")
    assert_succeeded(run_nimbus("train", tiny / "tiny.yaml", "--run-dir", tiny / "run"), "samples/s")
    assert_unchanged(before, tiny / "run")


def test_the_k8s_container_command_restarts_a_pod_killed_before_its_first_checkpoint(tiny):
    """The command `nimbus k8s` writes, run twice: a pod killed before its first checkpoint, then its
    replacement, which starts the same run afresh instead of failing or mixing runs."""
    manifest = run_nimbus("k8s", tiny / "tiny.yaml", "--name", "tiny", "--gpus", "cpu")
    script = None
    for line in manifest.stdout.splitlines():
        if "exec nimbus train" in line:
            script = line.split("- ", 1)[1].strip()
    assert script, manifest.describe()
    script = (script.replace("/runs/", f"{tiny}/runs/").replace("/etc/nimbus/config.yaml", str(tiny / "long.yaml"))
              .replace("exec nimbus", "exec " + nimbus_binary()).replace("--metrics-port 9400", "--metrics-port 0"))
    long_config(tiny)
    first = subprocess.Popen(["/bin/sh", "-c", script], preexec_fn=_limit_address_space,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run = tiny / "runs" / "tiny"
    try:
        wait_for(lambda: (run / "config.json").exists(), first)
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.communicate()
    for checkpoint in (run / "checkpoints").glob("*"):
        checkpoint.unlink()  # killed before its first checkpoint
    config = (run / "config.json").read_bytes()
    second = subprocess.Popen(["/bin/sh", "-c", script], preexec_fn=_limit_address_space,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: list((run / "checkpoints").glob("ckpt-*")), second)
    finally:
        os.kill(second.pid, signal.SIGKILL)
        out, err = second.communicate()
    assert "step 0" in out, out + err
    assert (run / "config.json").read_bytes() == config
