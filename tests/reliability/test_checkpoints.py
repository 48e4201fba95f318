"""Damaged checkpoints given to `nimbus evaluate`, `nimbus predict` and `nimbus train --resume`.

A checkpoint that is truncated, bit-flipped or not a checkpoint at all is refused by name (or, where
the newest of a run's checkpoints is damaged, skipped with a warning naming it for the one before),
and nothing in the run directory changes.
"""

import struct

import pytest

from nimbus_process import assert_refused, assert_succeeded, assert_unchanged, run_nimbus, snapshot


def trained_run(tiny):
    """tiny.yaml trained in tiny/run: ckpt-00000004, ckpt-00000008 and best.safetensors."""
    run = tiny / "run"
    assert_succeeded(run_nimbus("train", tiny / "tiny.yaml", "--run-dir", run), "samples/s")
    return run


def truncate(path, keep=0.5):
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])


def flip_a_bit(path, from_end=9):
    data = bytearray(path.read_bytes())
    data[-from_end] ^= 0x10
    path.write_bytes(bytes(data))


def test_evaluate_refuses_a_truncated_checkpoint_file(tiny):
    run = trained_run(tiny)
    checkpoint = run / "checkpoints" / "ckpt-00000008.safetensors"
    truncate(checkpoint)
    before = snapshot(run)
    outcome = run_nimbus("evaluate", run, "--checkpoint", checkpoint)
    assert_refused(outcome, str(checkpoint))
    assert_unchanged(before, run)


def test_evaluate_refuses_a_bit_flipped_checkpoint_file(tiny):
    run = trained_run(tiny)
    checkpoint = run / "checkpoints" / "ckpt-00000008.safetensors"
    flip_a_bit(checkpoint)
    before = snapshot(run)
    outcome = run_nimbus("evaluate", run, "--checkpoint", checkpoint)
    assert_refused(outcome, str(checkpoint), "checksum")
    assert_unchanged(before, run)


def test_evaluate_skips_a_damaged_newest_checkpoint_naming_it(tiny):
    run = trained_run(tiny)
    newest = run / "checkpoints" / "ckpt-00000008.safetensors"
    flip_a_bit(newest)
    before = snapshot(run)
    outcome = run_nimbus("evaluate", run)
    assert_succeeded(outcome, "weights from " + str(run / "checkpoints"))
    assert str(newest) in outcome.stderr and str(newest) not in outcome.stdout, outcome.describe()
    assert_unchanged(before, run)


def test_evaluate_refuses_a_run_whose_checkpoints_are_all_damaged(tiny):
    run = trained_run(tiny)
    for checkpoint in (run / "checkpoints").iterdir():
        flip_a_bit(checkpoint)
    before = snapshot(run)
    outcome = run_nimbus("evaluate", run)
    assert_refused(outcome, str(run / "checkpoints"), "no intact")
    assert_unchanged(before, run)


@pytest.mark.parametrize("damage", [
    struct.pack("<Q", 40) + b'{"a": {"dtype": "F32", "shape": [1, ',  # a header cut short
    struct.pack("<Q", 1 << 62) + b"{}",  # a header claiming 4 EiB
    b"",  # an empty file
], ids=["malformed_header", "huge_header", "empty"])
def test_predict_refuses_a_damaged_checkpoint(tiny, damage):
    run = trained_run(tiny)
    checkpoint = run / "checkpoints" / "best.safetensors"
    checkpoint.write_bytes(damage)
    before = snapshot(run)
    outcome = run_nimbus("predict", run, "--checkpoint", "best", "-o", tiny / "out.npy")
    assert_refused(outcome, str(checkpoint))
    assert not (tiny / "out.npy").exists()
    assert_unchanged(before, run)


def test_resume_skips_truncated_newest_checkpoints_naming_them(tiny):
    run = trained_run(tiny)
    newest = run / "checkpoints" / "ckpt-00000008.safetensors"
    truncate(newest)
    truncate(run / "checkpoints" / "best.safetensors")  # step 8 too
    outcome = run_nimbus("train", "--resume", run)
    assert_succeeded(outcome, "Resuming from " + str(run / "checkpoints" / "ckpt-00000004.safetensors"))
    assert str(newest) in outcome.stderr, outcome.describe()


def test_resume_refuses_a_run_whose_checkpoints_are_all_damaged(tiny):
    run = trained_run(tiny)
    for checkpoint in (run / "checkpoints").iterdir():
        truncate(checkpoint, 0.9)
    before = snapshot(run)
    outcome = run_nimbus("train", "--resume", run)
    assert_refused(outcome, str(run / "checkpoints"), "no intact")
    assert_unchanged(before, run)
