"""Shared by the tests that build kernels: one build cache for the whole run, so each kernel compiles once."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from workbench.evaluate.build.nvcc import build
from workbench.evaluate.gpu.toolchain import find_tool
from workbench.evaluate.result import BuildStage
from workbench.tasks import get_target

KERNELS = Path(__file__).parent / "data" / "kernels"

needs_nvcc = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")


def session_cache(factory: pytest.TempPathFactory) -> Path:
    """The same folder for every test of the run, whichever pytest-xdist worker runs it (a worker's
    basetemp lies in the run's). Workers may build one kernel at once: the cache publishes an entry by
    an atomic rename, and the loser reads the winner's."""
    base = factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = root / "ptxwb-builds"
    path.mkdir(exist_ok=True)
    return path


def build_kernel(name: str, target: str, cache: Path, timeout_s: float = 300.0) -> BuildStage:
    source = (KERNELS / name).read_text()
    return asyncio.run(build(source, get_target(target), timeout_s, cache))
