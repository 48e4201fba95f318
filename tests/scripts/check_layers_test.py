#!/usr/bin/env python3
"""scripts/check-layers passes on this tree and fails, naming the file, the line and both layers, on
small trees with an upward include (one that closes a cycle) and with a file past 1,500 lines.
Needs no build: `python3 tests/scripts/check_layers_test.py` (CTest runs it as check_layers, label core)."""
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check-layers"


def check(root):
    return subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True)


def check_tree(files):
    """check-layers on a tree of {path: text}."""
    with tempfile.TemporaryDirectory() as tmp:
        for path, text in files.items():
            (Path(tmp) / path).parent.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / path).write_text(text)
        return check(tmp)


class CheckLayersTest(unittest.TestCase):
    def test_this_tree_passes(self):
        result = check(ROOT)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("lines per folder", result.stdout)

    def test_downward_includes_pass(self):
        result = check_tree({
            "include/nimbus/base/shape.h": "#pragma once\n",
            "src/ops/internal/geometry.h": '#include "nimbus/base/shape.h"\n',
            "src/kernels/cpu/matmul.cc": '#include "src/ops/internal/geometry.h"\n',
        })
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_upward_include_fails_naming_file_line_and_layers(self):
        result = check_tree({
            "include/nimbus/ops/registry.h": '#pragma once\n#include "nimbus/device/backend.h"\n',
            "include/nimbus/device/backend.h": '#pragma once\n\n#include <vector>\n#include "nimbus/ops/registry.h"\n',
        })
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("include/nimbus/device/backend.h:4: device includes include/nimbus/ops/registry.h, of ops, "
                      "a layer above device", result.stderr)
        self.assertIn("closes the cycle include/nimbus/device/backend.h -> include/nimbus/ops/registry.h -> "
                      "include/nimbus/device/backend.h", result.stderr)
        self.assertNotIn("ops/registry.h:2", result.stderr)

    def test_relative_include_counts_as_its_folders_layer(self):
        result = check_tree({
            "src/train/batch_source.h": "#pragma once\n",
            "src/data/dataset.cc": '#include "../train/batch_source.h"\n',
        })
        self.assertEqual(result.returncode, 1)
        self.assertIn("src/data/dataset.cc:1: data includes src/train/batch_source.h, of train", result.stderr)

    def test_long_file_and_undeclared_folder_fail(self):
        result = check_tree({"src/nn/layers.cc": "int x;\n" * 1501, "src/widgets/widget.cc": "\n"})
        self.assertEqual(result.returncode, 1)
        self.assertIn("src/nn/layers.cc: 1501 lines, past 1500", result.stderr)
        self.assertIn("src/widgets/widget.cc: folder of no declared layer (widgets)", result.stderr)


if __name__ == "__main__":
    unittest.main()
