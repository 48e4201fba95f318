"""Runs `nimbus` as a real process for the hostile-input suite, under limits, and checks its answer.

Every case runs the command line a user would (tests/reliability/README.md): a 60-second time-out
and a 4 GiB address-space limit (RLIMIT_AS), so that a regression that hangs or grows without bound
fails its case instead of eating the machine.
"""

import gzip
import hashlib
import os
import resource
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_SECONDS = 60
ADDRESS_SPACE_BYTES = 4 << 30


def nimbus_binary() -> str:
    path = os.environ.get("NIMBUS_CLI")
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError(f"NIMBUS_CLI must name the built nimbus binary (got {path!r}); ctest sets it")
    return path


@dataclass
class Outcome:
    args: list
    returncode: int  # negative: killed by that signal; None never (a time-out raises)
    stdout: str
    stderr: str
    timed_out: bool

    def describe(self) -> str:
        return (f"nimbus {' '.join(map(str, self.args))}\n exit {self.returncode}"
                f"{' (timed out)' if self.timed_out else ''}\n stdout: {self.stdout[-2000:]}\n"
                f" stderr: {self.stderr[-2000:]}")


def _limit_address_space():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def run_nimbus(*args, cwd=None, input_text=None, env=None, timeout=TIMEOUT_SECONDS) -> Outcome:
    """Runs nimbus with `args` under the suite's limits; never raises for the process's own failure."""
    command = [nimbus_binary(), *map(str, args)]
    environment = dict(os.environ, **(env or {}))
    try:
        done = subprocess.run(command, cwd=cwd, input=input_text, capture_output=True, text=True,
                              errors="replace", timeout=timeout, env=environment,
                              preexec_fn=_limit_address_space)
        return Outcome(list(args), done.returncode, done.stdout, done.stderr, False)
    except subprocess.TimeoutExpired as expired:
        def text(data):
            return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")
        return Outcome(list(args), -9, text(expired.stdout), text(expired.stderr), True)


def assert_refused(outcome: Outcome, *culprits: str):
    """The command failed cleanly: an exit status in 1..127 (not a signal, not the time-out), and its
    message names every culprit (a file, key, line, layer, record or flag, and the remedy's words)."""
    assert not outcome.timed_out, "timed out:\n" + outcome.describe()
    assert 0 < outcome.returncode < 128, "expected a clean refusal:\n" + outcome.describe()
    message = outcome.stderr + outcome.stdout
    for culprit in culprits:
        assert culprit in message, f"the message does not name {culprit!r}:\n" + outcome.describe()


def assert_succeeded(outcome: Outcome, *expected: str):
    assert not outcome.timed_out, "timed out:\n" + outcome.describe()
    assert outcome.returncode == 0, "expected success:\n" + outcome.describe()
    for text in expected:
        assert text in outcome.stderr + outcome.stdout, f"the output lacks {text!r}:\n" + outcome.describe()


def snapshot(folder: Path) -> dict:
    """Every file under `folder` by relative path, with its SHA-256."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def assert_unchanged(before: dict, folder: Path):
    """Every file that was in `folder` is still there, byte for byte (new files may have appeared)."""
    after = snapshot(folder)
    for path, digest in before.items():
        assert path in after, f"{folder}/{path} was removed"
        assert after[path] == digest, f"{folder}/{path} was changed"


def write_idx(path: Path, array_shape, values: bytes):
    """An IDX file of unsigned bytes (the format of Fashion-MNIST), gzip-compressed when `path` ends in .gz."""
    header = struct.pack(">BBBB", 0, 0, 0x08, len(array_shape)) + b"".join(struct.pack(">I", d) for d in array_shape)
    data = header + values
    Path(path).write_bytes(gzip.compress(data) if str(path).endswith(".gz") else data)


def write_tiny_dataset(folder: Path, samples=64, side=4):
    """A tiny image-classification set: the class of each image is which quarter of it is bright."""
    pixels = bytearray()
    labels = bytearray()
    half = side // 2
    for i in range(samples):
        label = i % 4
        labels.append(label)
        image = bytearray([10] * side * side)
        row0, col0 = (label // 2) * half, (label % 2) * half
        for r in range(half):
            for c in range(half):
                image[(row0 + r) * side + col0 + c] = 250
        pixels += image
    write_idx(folder / "images.idx", (samples, side, side), bytes(pixels))
    write_idx(folder / "labels.idx", (samples,), bytes(labels))


def tiny_config(folder: Path, fit="{epochs: 2, batch_size: 16, verbose: 0}", layers=None, extra="") -> str:
    """A config training a small Dense model on write_tiny_dataset's files (validation: the same files)."""
    layers = layers or ["Flatten: {}", "Dense: {units: 4}"]
    layer_lines = "".join(f"    - {layer}\n" for layer in layers)
    return (f"model:\n  name: tiny\n  input_shape: [4, 4, 1]\n  layers:\n{layer_lines}"
            f"compile:\n  optimizer: {{name: adam, learning_rate: 0.01}}\n"
            f"  loss: {{name: sparse_categorical_crossentropy, from_logits: true}}\n  metrics: [accuracy]\n"
            f"data:\n  train: {{images: {folder}/images.idx, labels: {folder}/labels.idx}}\n"
            f"  validation: {{images: {folder}/images.idx, labels: {folder}/labels.idx}}\n"
            f"fit: {fit}\nruntime: {{threads: 1, seed: 1, deterministic: true}}\n{extra}")
