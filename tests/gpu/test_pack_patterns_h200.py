"""On a Hopper GPU (an H200 in this project): every compiled Hopper pattern of the knowledge pack runs
as a standalone program with its accumulators pre-poisoned with NaN (so a pattern that reads an
accumulator before its first MMA writes it fails), outputs NaN-filled, against a CPU reference under
the judge's tolerance. Two mutants that pass scale-d = 1 on the first MMA must fail: the poison is
live.

Run from the checkout on the GPU host (nvcc >= 12.5, a driver for sm_90a):
`python -m pytest -m gpu -n 0 -s tests/gpu/test_pack_patterns_h200.py`. With PTXWB_PACK_RUN_DIR set,
each program's output is also written there as <pattern>.txt (commit it as the run's record).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.pack_support import FIRST_STEP_MUTANTS, HOPPER_HARNESSES, harness_command, harness_dir

pytestmark = pytest.mark.gpu


def build_and_run(pattern: str, tmp_path: Path, mutant: bool = False) -> subprocess.CompletedProcess[str]:
    harness = HOPPER_HARNESSES[pattern]
    exe = tmp_path / harness.stem
    include = harness_dir("hopper", pattern, tmp_path, mutant)
    built = subprocess.run(
        harness_command("hopper", harness, include, exe),
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    ran = subprocess.run(
        [str(exe)], check=False, capture_output=True, text=True, timeout=120
    )  # a hang fails fast
    print(ran.stdout, ran.stderr)
    return ran


@pytest.mark.parametrize("pattern", sorted(HOPPER_HARNESSES))
def test_pattern_is_correct_with_poisoned_accumulators(pattern: str, tmp_path: Path) -> None:
    ran = build_and_run(pattern, tmp_path)
    record = os.environ.get("PTXWB_PACK_RUN_DIR")
    if record:
        name = Path(pattern).stem + ".txt"
        Path(record).mkdir(parents=True, exist_ok=True)
        (Path(record) / name).write_text(ran.stdout + ran.stderr)
    lines = ran.stdout.strip().splitlines()
    assert ran.returncode == 0 and lines and lines[-1] == "PASS", ran.stdout + ran.stderr


@pytest.mark.parametrize("pattern", sorted(FIRST_STEP_MUTANTS))
def test_scale_d_one_on_the_first_step_fails_under_poison(pattern: str, tmp_path: Path) -> None:
    ran = build_and_run(pattern, tmp_path, mutant=True)
    lines = ran.stdout.strip().splitlines()
    assert lines and lines[-1] == "FAIL", ran.stdout + ran.stderr
    assert "max_abs_err=inf" in ran.stdout, ran.stdout  # the harness reports a NaN error as inf
