"""MultiWorkerMirroredStrategy as TensorFlow's multi-worker guide uses it, launched by mpirun: two workers'
fit trains to the model one worker trains at the same global batch (multi_worker_fit.py is the script)."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN = shutil.which("mpirun") or "/usr/bin/mpirun"


def run(command, tmp_path):
    paths = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p] + [HERE]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths),
               # mpirun refuses root unless told; the tests run as root in containers.
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_two_workers_fit_matches_one_worker(tmp_path):
    if not os.path.exists(MPIRUN):
        pytest.skip("mpirun is missing (Debian's openmpi-bin)")
    if not os.path.isdir("/usr/share/datasets/fashion-mnist"):
        pytest.skip("Fashion-MNIST is missing (Debian's dataset-fashion-mnist)")
    script = os.path.join(HERE, "multi_worker_fit.py")
    run([sys.executable, script, "single", str(tmp_path / "one.npz")], tmp_path)
    run([MPIRUN, "--oversubscribe", "-np", "2", sys.executable, script, "multi", str(tmp_path / "two.npz")], tmp_path)
    for rank in range(2):
        report = (tmp_path / f"two.npz.worker-{rank}.txt").read_text(encoding="utf-8").splitlines()
        rows = list(range(4 * rank, 4 * rank + 4))
        assert report == [f"worker {rank} of 2", f"worker {rank} rows {rows}", f"worker {rank} sum 28.0 mean 3.5"]
    one, two = np.load(tmp_path / "one.npz"), np.load(tmp_path / "two.npz")
    assert abs(float(two["accuracy"]) - float(one["accuracy"])) <= 0.01
    assert float(one["accuracy"]) > 0.7  # it learned (one epoch of SGD on 25,600 images)
    weights = sorted(k for k in one.files if k.startswith("arr_"))
    for key in weights:
        np.testing.assert_allclose(two[key], one[key], rtol=1e-4, atol=1e-5)
