"""The honest corpus: kernels written the way outside authors write them, each in its own style.

Every rule that can refuse a kernel is checked against these (statically in CI, every tier on the H200):
a refusal of one of them is a bug in the rule. Each file's first line says which construct it exercises.
"""

from __future__ import annotations

import re
from pathlib import Path

HONEST = Path(__file__).parent / "data" / "honest"
CUDA = sorted(HONEST.glob("*.cu"))
TRITON = sorted((HONEST / "triton").glob("*.py"))
TASK = "gemm_n7168_k5120"
_TASK_LINE = re.compile(r"^(?://|#) task: (\S+)$", re.MULTILINE)


def task_of(path: Path) -> str:
    """The task a kernel's header names (`// task: NAME` among its first lines), else the headline GEMM."""
    found = _TASK_LINE.search("\n".join(path.read_text().splitlines()[:8]))
    return found.group(1) if found else TASK


def target_of(path: Path) -> str:
    """The corpus's Blackwell kernels say so in their name; the rest are Hopper kernels."""
    return "blackwell" if path.stem.startswith("blackwell") else "hopper"
