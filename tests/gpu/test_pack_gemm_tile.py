"""On a Hopper GPU: the Hopper pack's helpers and its warp-specialisation pattern compute correct results
in standalone programs (no torch), each printing its errors and PASS or FAIL.

- `pack_gemm_tile.cu`: mbarrier ring + TMA loads with tensor maps + K-major smem descriptors + SS wgmma,
  a 128x256x512 bf16 GEMM written both from the accumulator fragments and through a TMA store.
- `pack_rs_mnmajor.cu`: the attention data path: SS wgmma for S = Q K^T, the accumulator converted to
  register A fragments, RS wgmma with V as an MN-major (transposed) operand; exact arithmetic.
- `pattern_ws_harness.cu`: the kernel of `knowledge_packs/hopper/patterns/warp_specialization.md`
  (extracted from the markdown), persistent, setmaxnreg, 2 consumer warpgroups, m64n256 wgmma.

Run on the GPU host from the checkout: `.venv/bin/python -m pytest -m gpu -s tests/gpu/test_pack_gemm_tile.py`
(needs nvcc >= 12.5 and a driver that runs sm_90a; `-s` prints each program's output).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.pack_support import GPU_DATA, extract_pattern_kernel, header_dirs
from workbench.evaluate.gpu.toolchain import find_tool
from workbench.tasks.targets import get_target

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("program", ["pack_gemm_tile.cu", "pack_rs_mnmajor.cu", "pattern_ws_harness.cu"])
def test_hopper_pack_on_the_gpu(program: str, tmp_path: Path) -> None:
    nvcc = find_tool("nvcc")
    assert nvcc is not None, "nvcc is needed on the GPU host"
    extract_pattern_kernel(tmp_path)
    includes = [f"-I{d}" for d in header_dirs("hopper")]
    exe = tmp_path / Path(program).stem
    built = subprocess.run(
        [
            str(nvcc),
            "-std=c++17",
            "-O2",
            "-gencode",
            get_target("hopper").gencode,
            *includes,
            f"-I{tmp_path}",
            "-o",
            str(exe),
            str(GPU_DATA / program),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(exe)], check=False, capture_output=True, text=True, timeout=120)
    print(ran.stdout, ran.stderr)
    lines = ran.stdout.strip().splitlines()
    assert ran.returncode == 0 and lines and lines[-1] == "PASS", ran.stdout + ran.stderr
