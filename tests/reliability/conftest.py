"""Fixtures of the hostile-input suite (nimbus_process.py runs the processes)."""

import pytest

from nimbus_process import tiny_config, write_tiny_dataset


@pytest.fixture
def tiny(tmp_path):
    """A folder with write_tiny_dataset's files and a valid config for them, tiny.yaml."""
    write_tiny_dataset(tmp_path)
    (tmp_path / "tiny.yaml").write_text(tiny_config(tmp_path))
    return tmp_path
