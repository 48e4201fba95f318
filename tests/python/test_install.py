"""`cmake --install` gives a package that imports and runs without the build tree (docs/python.md)."""
import os
import subprocess
import sys
from pathlib import Path


def test_the_installed_package_imports_and_computes_outside_the_build(tmp_path):
    build = os.environ["NIMBUS_BUILD_DIR"]
    subprocess.run(["cmake", "--install", build, "--prefix", str(tmp_path)], check=True, capture_output=True)
    [package] = tmp_path.glob("lib/python3*/dist-packages/nimbus")
    assert (package / "libnimbus.so").exists()
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    environment["PYTHONPATH"] = str(package.parent)
    done = subprocess.run(
        [sys.executable, "-c", "import nimbus; print(nimbus.__file__); print((nimbus.constant([1.0, 2.0]) * 2).numpy())"],
        capture_output=True, text=True, cwd=tmp_path, env=environment, check=False)
    assert done.returncode == 0, done.stderr
    where, values = done.stdout.splitlines()
    assert Path(where).parent == package
    assert values == "[2. 4.]"
