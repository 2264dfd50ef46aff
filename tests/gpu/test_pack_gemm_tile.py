"""On a Hopper GPU: the Hopper pack's helpers (mbarrier, TMA with tensor maps, smem descriptors,
wgmma, TMA store) compute a correct 128x256x512 bf16 GEMM in a standalone program (no torch).

Run on the GPU host from the checkout: `.venv/bin/python -m pytest -m gpu -s tests/gpu/test_pack_gemm_tile.py`
(needs nvcc >= 12.5 and a driver that runs sm_90a; prints the program's output).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from workbench.evaluate.toolchain import find_tool
from workbench.knowledge import load_pack
from workbench.paths import knowledge_packs_dir
from workbench.tasks.targets import get_target

pytestmark = pytest.mark.gpu

PROGRAM = Path(__file__).parent / "data" / "pack_gemm_tile.cu"


def test_hopper_pack_helpers_compute_a_gemm_tile(tmp_path: Path) -> None:
    nvcc = find_tool("nvcc")
    assert nvcc is not None, "nvcc is needed on the GPU host"
    root = knowledge_packs_dir()
    includes = sorted({f"-I{(root / f.path).parent}" for f in load_pack("hopper").files if f.kind == "header"})
    exe = tmp_path / "pack_gemm_tile"
    built = subprocess.run([str(nvcc), "-std=c++17", "-O2", "-gencode", get_target("hopper").gencode,
                            *includes, "-o", str(exe), str(PROGRAM)], check=False, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(exe)], check=False, capture_output=True, text=True, timeout=120)
    print(ran.stdout, ran.stderr)
    lines = ran.stdout.strip().splitlines()
    assert ran.returncode == 0 and lines and lines[-1] == "PASS", ran.stdout + ran.stderr
