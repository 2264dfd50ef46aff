"""The package's gates: ruff's lint and format, and mypy, each with zero findings over `workbench/`
(settings in pyproject.toml; mypy pinned in the dev lock)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "command",
    [
        ["-m", "ruff", "check", "workbench"],
        ["-m", "ruff", "format", "--check", "workbench"],
        ["-m", "mypy", "--cache-dir", "/dev/null"],
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_the_package_passes(command: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, *command], cwd=ROOT, check=False, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
