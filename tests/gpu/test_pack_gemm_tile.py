"""On a Hopper GPU: the Hopper pack's helpers compute exact results in two standalone programs (no torch).

- `pack_gemm_tile.cu`: mbarrier ring + TMA loads with tensor maps + K-major smem descriptors + SS wgmma,
  a 128x256x512 bf16 GEMM written both from the accumulator fragments and through a TMA store.
- `pack_rs_mnmajor.cu`: the attention data path: SS wgmma for S = Q K^T, the accumulator converted to
  register A fragments, RS wgmma with V as an MN-major (transposed) operand.

Run on the GPU host from the checkout: `.venv/bin/python -m pytest -m gpu -s tests/gpu/test_pack_gemm_tile.py`
(needs nvcc >= 12.5 and a driver that runs sm_90a; `-s` prints each program's output).
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

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("program", ["pack_gemm_tile.cu", "pack_rs_mnmajor.cu"])
def test_hopper_pack_helpers_on_the_gpu(program: str, tmp_path: Path) -> None:
    nvcc = find_tool("nvcc")
    assert nvcc is not None, "nvcc is needed on the GPU host"
    root = knowledge_packs_dir()
    includes = sorted({f"-I{(root / f.path).parent}" for f in load_pack("hopper").files if f.kind == "header"})
    exe = tmp_path / Path(program).stem
    built = subprocess.run([str(nvcc), "-std=c++17", "-O2", "-gencode", get_target("hopper").gencode,
                            *includes, "-o", str(exe), str(DATA / program)],
                           check=False, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(exe)], check=False, capture_output=True, text=True, timeout=120)
    print(ran.stdout, ran.stderr)
    lines = ran.stdout.strip().splitlines()
    assert ran.returncode == 0 and lines and lines[-1] == "PASS", ran.stdout + ran.stderr
