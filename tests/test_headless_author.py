"""The author driver runs without the TUI's packages: benchmarks/latency.py times save-to-verdict with it on a
GPU host that has only the worker's wheels (textual absent)."""

from __future__ import annotations

import subprocess
import sys

BLOCK_TEXTUAL = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "textual" or name.startswith("textual."):
            raise ImportError("no textual here")
sys.meta_path.insert(0, Block())
import workbench.tui.drivers.author
print("imported", "textual" in sys.modules)
"""


def test_the_author_driver_imports_where_textual_is_absent() -> None:
    done = subprocess.run([sys.executable, "-c", BLOCK_TEXTUAL], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "imported False"
