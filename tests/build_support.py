"""Shared by the static-evaluation tests: one build cache per test session, so each kernel compiles once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from workbench.evaluate.build import build
from workbench.evaluate.result import BuildStage
from workbench.evaluate.toolchain import find_tool
from workbench.tasks import get_target

KERNELS = Path(__file__).parent / "data" / "kernels"

needs_nvcc = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")


def session_cache(factory: pytest.TempPathFactory) -> Path:
    """The same folder for every test module of this session (basetemp is per session)."""
    path = factory.getbasetemp() / "ptxwb-builds"
    path.mkdir(exist_ok=True)
    return path


def build_kernel(name: str, target: str, cache: Path, timeout_s: float = 300.0) -> BuildStage:
    source = (KERNELS / name).read_text()
    return asyncio.run(build(source, get_target(target), timeout_s, cache))
