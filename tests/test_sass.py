"""Static SASS on real cuobjdump output: parsing, opcodes, families, the required family."""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

import pytest

from tests.build_support import build_kernel, needs_nvcc, session_cache
from workbench.evaluate.build.sass import (
    FAMILIES,
    disassemble,
    family_counts,
    family_of,
    missing_family_message,
    parse_sass,
    static_stage,
)
from workbench.evaluate.gpu.toolchain import find_tool
from workbench.evaluate.result import StaticStage, Status
from workbench.tasks import get_target

# Captured with cuobjdump --dump-sass from tests/data/kernels/tma_copy.cu built by nvcc 13.0 for sm_90a.
TMA_DUMP = Path(__file__).parent / "data" / "sass" / "tma_copy.sm_90a.sass"

needs_cuobjdump = pytest.mark.skipif(find_tool("cuobjdump") is None, reason="cuobjdump is not installed")


def test_parser_counts_instruction_lines_only() -> None:
    text = TMA_DUMP.read_text()
    dump = parse_sass(text)
    [name] = dump.kernels
    assert "tma_copy" in name
    instruction_lines = [line for line in text.splitlines() if re.match(r"^\s*/\*[0-9a-f]{4}\*/", line)]
    assert sum(dump.opcodes.values()) == len(instruction_lines)
    assert dump.opcodes["UTMALDG"] == 1 and dump.opcodes["UTMASTG"] == 1
    assert dump.opcodes["SYNCS"] == 4
    assert dump.opcodes["ELECT"] == 1  # `@P0 ELECT P2, URZ, PT`: the predicate is not the opcode
    assert not any(op.startswith(("@", "P")) and op not in ("PLOP3", "PRMT") for op in dump.opcodes)


def test_families_of_the_tma_dump() -> None:
    opcodes = parse_sass(TMA_DUMP.read_text()).opcodes
    families = family_counts(opcodes)
    assert families["TMA"] == 3  # UTMALDG, UTMASTG, UTMACMDFLUSH
    assert families["MBARRIER"] == 4
    assert "GMMA" not in families
    message = missing_family_message("GMMA", opcodes)
    assert "no GMMA instruction" in message and "UTMALDG x1" in message and "SYNCS x4" in message


def test_a_kernel_without_the_copy_engine_is_told_what_moves_its_bytes_instead() -> None:
    opcodes = {"LDG": 17, "LDGSTS": 4, "FFMA": 127, "STG": 3}
    message = missing_family_message("ASYNC_COPY", opcodes)
    assert message.startswith("no ASYNC_COPY instruction (UBLKCP/UTMALDG")
    assert "it has instead: LDG x17 (ordinary global loads); LDGSTS x4 (cp.async" in message
    assert "FFMA x127" in message and "STG" not in message
    # The loads are named only where the copy engine is what is missing.
    assert "LDG" not in missing_family_message("GMMA", opcodes)


def test_predicates_and_modifiers() -> None:
    text = (
        "\t\tFunction : k\n"
        "        /*0000*/              @!PT HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24, gsb0 ;  /* 0x0 */\n"
        "                                                                                         /* 0x000 */\n"
        "        /*0010*/               @P1 SYNCS.ARRIVE.TRANS64.RED.A1T0 RZ, [UR5], R0 ;\n"
        "        /*0020*/              @!UP0 UTCHMMA gdesc[UR6], gdesc[UR8], tmem[UR12], idesc[UR17], UP0 ;\n"
        "        /*0030*/                   EXIT ;\n"
    )
    dump = parse_sass(text)
    assert dict(dump.kernels["k"]) == {"HGMMA": 1, "SYNCS": 1, "UTCHMMA": 1, "EXIT": 1}
    assert family_counts(dump.opcodes) == {"GMMA": 1, "MBARRIER": 1, "TCGEN05_MMA": 1}


def test_each_matrix_multiply_counts_at_its_smallest_shape_in_the_dump() -> None:
    # The spellings ptxas 13.0 gives sm_90a (a probe of every mma.sync and wgmma operand type).
    lines = [
        "HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24, gsb0",
        "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24, gsb0",
        "IGMMA.64x8x32.S8.S8 R8, gdesc[UR4], R8",
        "QGMMA.64x256x32.F32.E4M3.E4M3 R8, gdesc[UR4], R8",
        "HMMA.16816.F32.BF16 R4, R8, R12, R4",
        "HMMA.1688.F32.TF32 R4, R8, R12, R4",
        "IMMA.16832.S8.S8 R4, R8, R12, R4",
        "DMMA.8x8x4 R4, R8, R12, R4",
        "DMMA.16x8x16 R4, R8, R12, R4",
        "FFMA R1, R2, R3, R4",
    ]
    text = "\t\tFunction : k\n" + "".join(
        f"        /*{i:04x}*/  @P0 {line} ;\n" for i, line in enumerate(lines)
    )
    assert parse_sass(text).mma_flops_per_thread == {
        "HGMMA": 2 * 64 * 128 * 16 / 128,  # a warpgroup's
        "IGMMA": 2 * 64 * 8 * 32 / 128,
        "QGMMA": 2 * 64 * 256 * 32 / 128,
        "HMMA": 2 * 16 * 8 * 8 / 32,  # a warp's: tf32 m16n8k8 is the smaller
        "IMMA": 2 * 16 * 8 * 32 / 32,
        "DMMA": 2 * 8 * 8 * 4 / 32,
    }
    # A shape not read here leaves the opcode to its least over every shape.
    odd = text + "        /*0100*/  HMMA.SP.16832.F32.BF16 R4, R8, R12, R4 ;\n"
    assert "HMMA" not in parse_sass(odd).mma_flops_per_thread


def test_family_tables_match_design() -> None:
    assert {"HGMMA", "QGMMA", "IGMMA"} <= FAMILIES["GMMA"]
    assert {"UTMALDG", "UTMASTG", "UTMAREDG", "UTMAPF"} <= FAMILIES["TMA"]
    assert FAMILIES["BULK"] >= {"UBLKCP"} and FAMILIES["MBARRIER"] == {"SYNCS"}
    assert FAMILIES["SETMAXNREG"] == {"USETMAXREG"}
    assert {"UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCOMMA"} <= FAMILIES["TCGEN05_MMA"]
    assert FAMILIES["TMEM"] == {"LDTM", "STTM"}
    assert {"UTCBAR", "UTCATOMSWS"} <= FAMILIES["TCGEN05_OTHER"]


# ------------------------------------------------------------------ live: nvcc + cuobjdump


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_cache(tmp_path_factory)


def static_of(name: str, target: str, cache: Path) -> StaticStage:
    build = build_kernel(name, target, cache)
    assert build.status == Status.passed, build.compiler_output
    return asyncio.run(static_stage(build, get_target(target)))


@needs_nvcc
@needs_cuobjdump
def test_wgmma_kernel_has_gmma(cache: Path) -> None:
    stage = static_of("wgmma_gemm.cu", "hopper", cache)
    assert stage.status == Status.passed
    assert stage.required_family == "GMMA" and stage.required_present
    assert stage.families["GMMA"] == stage.opcodes["HGMMA"] >= 1
    [(kernel, counts)] = stage.kernels.items()
    assert "gemm_wgmma" in kernel and counts["HGMMA"] >= 1
    assert stage.sass_path and Path(stage.sass_path).is_file()
    assert "HGMMA.64x64x16.F32.BF16" in Path(stage.sass_path).read_text()


@needs_nvcc
@needs_cuobjdump
def test_mma_sync_kernel_is_missing_gmma_and_says_hmma(cache: Path) -> None:
    stage = static_of("mma_sync_gemm.cu", "hopper", cache)
    assert stage.status == Status.static_missing_family and not stage.required_present
    assert stage.families.get("MMA_SYNC", 0) >= 1 and "GMMA" not in stage.families
    assert "HMMA x" in stage.message and "mma.sync/WMMA" in stage.message
    assert stage.mma_flops_per_thread == {"HMMA": 128.0}


@needs_nvcc
@needs_cuobjdump
def test_simt_kernel_has_no_family(cache: Path) -> None:
    stage = static_of("abi_example.cu", "hopper", cache)
    assert stage.status == Status.static_missing_family
    assert set(stage.families) == {"SIMT_FMA"}
    assert "FFMA x" in stage.message and "no tensor core" in stage.message


@needs_nvcc
@needs_cuobjdump
def test_tma_kernel_alone_is_not_enough(cache: Path) -> None:
    stage = static_of("tma_copy.cu", "hopper", cache)
    assert stage.status == Status.static_missing_family
    assert stage.opcodes["UTMALDG"] == 1 and stage.opcodes["UTMASTG"] == 1
    assert stage.families["TMA"] >= 2 and stage.families["MBARRIER"] >= 1


@needs_nvcc
@needs_cuobjdump
def test_tcgen05_kernel_on_blackwell(cache: Path) -> None:
    stage = static_of("tcgen05_gemm.cu", "blackwell", cache)
    assert stage.status == Status.passed
    assert stage.required_family == "TCGEN05_MMA" and stage.required_present
    assert stage.opcodes["UTCHMMA"] >= 1 and stage.opcodes["LDTM"] >= 1
    assert stage.opcodes["UTCBAR"] >= 1 and stage.opcodes["UTCATOMSWS"] >= 1  # commit; alloc/dealloc
    assert {"TCGEN05_MMA", "TMEM", "TCGEN05_OTHER", "MBARRIER"} <= set(stage.families)


@needs_nvcc
@needs_cuobjdump
@pytest.mark.parametrize(
    ("probe", "arch", "expected"),
    [
        (
            "family_probe_sm90a.cu",
            "sm_90a",
            {
                "QGMMA": "GMMA",
                "IGMMA": "GMMA",
                "UBLKCP": "BULK",
                "UBLKRED": "BULK",
                "UBLKPF": "BULK",
                "UTMAREDG": "TMA",
                "UTMAPF": "TMA",
                "UTMACCTL": "TMA",
                "USETMAXREG": "SETMAXNREG",
            },
        ),
        (
            "family_probe_sm100a.cu",
            "sm_100a",
            {
                "UTCHMMA": "TCGEN05_MMA",
                "UTCQMMA": "TCGEN05_MMA",
                "UTCIMMA": "TCGEN05_MMA",
                "UTCOMMA": "TCGEN05_MMA",
                "STTM": "TMEM",
                "UTCCP": "TCGEN05_OTHER",
                "UTCSHIFT": "TCGEN05_OTHER",
            },
        ),
    ],
)
def test_family_tables_against_real_sass(
    probe: str, arch: str, expected: dict[str, str], tmp_path: Path
) -> None:
    nvcc = find_tool("nvcc")
    cubin = tmp_path / "probe.cubin"
    source = Path(__file__).parent / "data" / "kernels" / probe
    done = subprocess.run(
        [str(nvcc), f"-arch={arch}", "-cubin", "-o", str(cubin), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    disassembly = asyncio.run(disassemble(cubin))
    assert disassembly.text is not None, disassembly.error
    opcodes = parse_sass(disassembly.text).opcodes
    for opcode, family in expected.items():
        assert opcodes[opcode] >= 1, f"{opcode} not in the {arch} probe's SASS"
        assert family_of(opcode) == family
