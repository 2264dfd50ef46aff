"""Every helper header of every knowledge pack compiles with real nvcc for its pack's target, every
helper is instantiated by a check translation unit, and the SASS holds the instructions they promise."""

from __future__ import annotations

import asyncio
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest
from build_support import session_cache

from tests.pack_support import GPU_DATA, extract_pattern_kernel, header_dirs
from workbench.evaluate.build.nvcc import build
from workbench.evaluate.gpu.toolchain import find_tool
from workbench.evaluate.result import Status
from workbench.knowledge import load_pack
from workbench.paths import knowledge_packs_dir
from workbench.tasks.targets import get_target

CHECKS = Path(__file__).parent / "data" / "pack_headers"
TARGETS = ("hopper", "blackwell")

needs_nvcc = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")
needs_cuobjdump = pytest.mark.skipif(find_tool("cuobjdump") is None, reason="cuobjdump is not installed")

# A helper is a function defined in a header: `__device__ __forceinline__ T name(` or `inline T name(`.
HELPER = re.compile(
    r"^(?:template <[^>]*>\s*)?(?:__device__ __forceinline__|inline)\s+[\w:<>\s]+?\b(\w+)\(", re.MULTILINE
)


def header_paths(target: str) -> list[Path]:
    root = knowledge_packs_dir()
    return [root / f.path for f in load_pack(target).files if f.kind == "header"]


def check_units(target: str) -> list[Path]:
    """The check translation units that include at least one of the pack's headers."""
    names = {p.name for p in header_paths(target)}
    return [
        cu for cu in sorted(CHECKS.glob("*.cu")) if any(f'#include "{n}"' in cu.read_text() for n in names)
    ]


@cache
def compile_cubin(source: Path, target: str, out_dir: Path) -> Path:
    includes = header_dirs(target)
    cubin = out_dir / f"{source.stem}.{target}.cubin"
    cmd = [
        str(find_tool("nvcc")),
        "-std=c++17",
        "-O2",
        "-cubin",
        "-gencode",
        get_target(target).gencode,
        *(f"-I{d}" for d in includes),
        "-o",
        str(cubin),
        str(source),
    ]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(cmd)}\n{done.stderr}"
    return cubin


def sass(cubin: Path) -> str:
    done = subprocess.run(
        [str(find_tool("cuobjdump")), "--dump-sass", str(cubin)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pack-headers")


@pytest.mark.parametrize("target", TARGETS)
def test_every_header_and_helper_is_covered_by_a_check_unit(target: str) -> None:
    units = check_units(target)
    covered = "\n".join(cu.read_text() for cu in units)
    for header in header_paths(target):
        assert f'#include "{header.name}"' in covered, f"no check unit includes {header.name}"
        helpers = HELPER.findall(header.read_text())
        assert helpers, f"no helpers found in {header.name}"
        for name in helpers:
            assert re.search(rf"\b{name}\b", covered), f"{header.name}: helper {name} is never instantiated"


@needs_nvcc
@pytest.mark.parametrize("target", TARGETS)
def test_check_units_compile_for_the_target(target: str, out_dir: Path) -> None:
    units = check_units(target)
    assert units
    for unit in units:
        assert compile_cubin(unit, target, out_dir).stat().st_size > 0


@needs_nvcc
@needs_cuobjdump
@pytest.mark.parametrize("target", TARGETS)
def test_tma_and_barrier_helpers_emit_tma_and_syncs(target: str, out_dir: Path) -> None:
    code = sass(compile_cubin(CHECKS / "common_check.cu", target, out_dir))
    for opcode in ("UTMALDG", "UTMASTG", "UTMAREDG", "UTMAPF", "SYNCS.ARRIVE", "SYNCS.PHASECHK"):
        assert opcode in code, opcode


@needs_nvcc
@needs_cuobjdump
def test_wgmma_helpers_emit_hgmma_setmaxreg_and_stsm(out_dir: Path) -> None:
    code = sass(compile_cubin(CHECKS / "hopper_check.cu", "hopper", out_dir))
    for opcode in (
        "HGMMA.64x64x16.F32.BF16",
        "HGMMA.64x128x16.F32.BF16",
        "HGMMA.64x256x16.F32.BF16",
        "USETMAXREG",
        "STSM",
    ):
        assert opcode in code, opcode


@needs_nvcc
@needs_cuobjdump
def test_tcgen05_helpers_emit_utchmma_utcqmma_tmem_gather_and_pair_forms(out_dir: Path) -> None:
    code = sass(compile_cubin(CHECKS / "blackwell_check.cu", "blackwell", out_dir))
    for opcode in (
        "UTCHMMA",
        "UTCHMMA.2CTA",
        "UTCBAR",
        "UTCBAR.2CTA.MULTICAST",
        "LDTM.x16",
        "LDTM.x32",
        "STTM.x16",
        "STTM.x32",
        "UTMALDG.2D.2CTA",
        "UTCQMMA",
        "UTMALDG.2D.GATHER4",
    ):
        assert opcode in code, opcode


# Slow: the GPU tests build these programs before anything runs, and here the pack's headers are built by
# the check units above and the ABI example below, and its patterns' kernels by test_pack_patterns.py.
@pytest.mark.slow
@needs_nvcc
@needs_cuobjdump
@pytest.mark.parametrize(
    ("program", "opcodes"),
    [
        ("pack_gemm_tile.cu", ("HGMMA.64x128x16.F32.BF16", "UTMALDG", "UTMASTG", "SYNCS.PHASECHK")),
        ("pack_rs_mnmajor.cu", ("HGMMA.64x64x16.F32.BF16", "HGMMA.64x128x16.F32.BF16", ".tnspB", "UTMALDG")),
        ("pattern_ws_harness.cu", ("HGMMA.64x256x16.F32.BF16", "USETMAXREG.TRY_ALLOC", "USETMAXREG.DEALLOC")),
    ],
)
def test_gpu_test_programs_build_clean_here(program: str, opcodes: tuple[str, ...], tmp_path: Path) -> None:
    """The H200 test's programs (one of them the warp-specialisation pattern's kernel, taken from the
    markdown) compile here without spills or serialised wgmma, so the GPU run can only fail on the
    GPU's verdict."""
    extract_pattern_kernel(tmp_path)
    includes = [f"-I{d}" for d in header_dirs("hopper")]
    exe = tmp_path / Path(program).stem
    done = subprocess.run(
        [
            str(find_tool("nvcc")),
            "-std=c++17",
            "-O2",
            "-gencode",
            get_target("hopper").gencode,
            "-Xptxas",
            "-v",
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
    assert done.returncode == 0, done.stderr
    assert "0 bytes spill stores" in done.stderr
    assert "Potential Performance Loss" not in done.stderr, done.stderr
    code = sass(exe)
    for opcode in opcodes:
        assert opcode in code, opcode


@needs_nvcc
@pytest.mark.parametrize("target", TARGETS)
def test_abi_example_builds_through_the_evaluators_build_stage(
    target: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The `run` example every pack shows the model is a valid candidate for the build stage."""
    abi = (knowledge_packs_dir() / "common" / "abi.md").read_text()
    example = re.search(r"```cuda\n(.*?)```", abi, re.DOTALL)
    assert example is not None
    stage = asyncio.run(build(example.group(1), get_target(target), 300.0, session_cache(tmp_path_factory)))
    assert stage.status == Status.passed, stage.compiler_output
    assert stage.library_path and Path(stage.library_path).is_file()
