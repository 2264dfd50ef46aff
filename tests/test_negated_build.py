"""The negated build: every floating-point wgmma's A flipped in the PTX, compiled by the build's own ptxas
command, and put in place of the cubin in a copy of the library (`build/negated.py`)."""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

import pytest

from tests.build_support import KERNELS, build_kernel, needs_nvcc, session_cache
from workbench.evaluate.build.negated import negate_products, products_not_negated, ptxas_line
from workbench.evaluate.build.nvcc import build, with_negated
from workbench.evaluate.gpu.toolchain import find_tool
from workbench.evaluate.result import Status
from workbench.tasks import get_target

D = "{%f1, %f2, %f3, %f4}"


def _same_lines_and_length(before: str, after: str) -> str:
    """`after` where it has `before`'s length and lines (the cubin keeps the PTX's lines), without spaces."""
    assert len(after) == len(before) and after.count("\n") == before.count("\n")
    return re.sub(r"\s+", "", after)


@pytest.mark.parametrize(
    ("instruction", "negated"),
    [
        # shared-memory A: d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b
        (
            f"wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {D}, %rd1, %rd2, p, 1, 1, 0, 0;",
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16{%f1,%f2,%f3,%f4},%rd1,%rd2,p,-1,1,0,0;",
        ),
        # register A, no imm-trans-a; a scale already -1 flips back
        (
            f"wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {D}, {{%r1,%r2,%r3,%r4}}, %rd2, 1, -1, 1, 1;",
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16{%f1,%f2,%f3,%f4},{%r1,%r2,%r3,%r4},%rd2,1,1,1,1;",
        ),
        # FP8: no transposes
        (
            f"wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e5m2 {D}, %rd1, %rd2, p, 1, 1;",
            "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e5m2{%f1,%f2,%f3,%f4},%rd1,%rd2,p,-1,1;",
        ),
        # sparse: sp-meta and sp-sel come before scale-d
        (
            f"wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.bf16.bf16 {D}, %rd1, %rd2, %r9, 0, p, 1, 1, 0, 0;",
            "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.bf16.bf16{%f1,%f2,%f3,%f4},%rd1,%rd2,%r9,0,p,-1,1,0,0;",
        ),
    ],
)
def test_every_floating_point_wgmma_has_its_a_negated(instruction: str, negated: str) -> None:
    ptx = f"\t// begin inline asm\n\t{instruction}\n\twgmma.commit_group.sync.aligned;\n"
    result = negate_products(ptx)
    assert _same_lines_and_length(ptx, result) == re.sub(r"\s+", "", ptx.replace(instruction, negated))


@pytest.mark.parametrize(
    ("scale", "flipped"),
    [("0x1", "-(0x1)"), ("01U", "-(01U)"), ("(2-1)", "-((2-1))"), ("/* a; */ -1 // b;\n", "1")],
)
def test_a_scale_in_any_form_ptxas_folds_is_flipped(scale: str, flipped: str) -> None:
    """Literals in any base, constant expressions, comments (a `;` in one too), no space before the
    operands: ptxas assembles each, so each is negated, as `-(scale)` (which ptxas folds) where it is
    not a plain 1 or -1, in the same length and lines, taken from the spaces after its commas and, where
    those are too few, from the space before a tab in another line of cicc's."""
    ptx = (
        f"wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16{D}, %rd1, %rd2, p, {scale}, 1, 0, 0;\n"
        "\tmov.u32 \t%r1, %r2;\n"
    )
    result = negate_products(ptx)
    assert f"%rd2,p,{flipped},1,0,0;mov.u32" in _same_lines_and_length(ptx, result)


def test_a_compact_wgmma_takes_its_flips_length_from_ciccs_lines() -> None:
    """No space in the instruction to give: what `-(0x1)` adds comes out of the space before a tab in
    cicc's own lines, so the PTX keeps its length and lines all the same."""
    compact = "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16{%f1,%f2,%f3,%f4},%rd1,%rd2,p,0x1,1,0,0;"
    ptx = f"{compact}\n" + "\tmov.u32 \t%r1, %r2;\n" * 4
    result = negate_products(ptx)
    assert "p,-(0x1),1,0,0;" in _same_lines_and_length(ptx, result)
    assert result.count("mov.u32 \t") == 1


def test_a_line_end_before_the_operands_stays_where_it_is() -> None:
    ptx = "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16\n{%f1,%f2,%f3,%f4},%rd1,%rd2,p,1,1,0,0;\n"
    result = negate_products(ptx + "\tmov.u32 \t%r1, %r2;\n")
    assert result.startswith("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16\n{")
    assert "p,-1,1,0,0;" in _same_lines_and_length(ptx + "\tmov.u32 \t%r1, %r2;\n", result)


def _listing(*instructions: str) -> str:
    """A cuobjdump listing of `instructions`, with addresses and encodings."""
    lines = [f"        /*{8 * n:04x}*/  {text} ;  /* 0x{n:016x} */" for n, text in enumerate(instructions)]
    return "\n".join(["\t\tFunction : gemm", *lines])


ORIGINAL = (
    "HGMMA.64x64x16.F32.BF16 R88, gdesc[UR4], RZ, !UPT",
    "HGMMA.64x128x16.F32.BF16 R24, R132, gdesc[UR4].tnspB, R24, gsb0",
    "@P0 QGMMA.64x128x32.F32.E4M3.E4M3 R88, gdesc[UR20], R88",
    "FFMA R1, R2, R3, R4",
)


@pytest.mark.parametrize(
    ("negated", "expected"),
    [
        # every product flipped: a descriptor's .negA, a register's sign, under a predicate too
        (
            (
                "HGMMA.64x64x16.F32.BF16 R88, gdesc[UR4].negA, RZ, !UPT",
                "HGMMA.64x128x16.F32.BF16 R24, -R132, gdesc[UR4].tnspB, R24, gsb0",
                "@P0 QGMMA.64x128x32.F32.E4M3.E4M3 R88, gdesc[UR20].negA, R88",
                "FFMA R1, R2, R3, R4",
            ),
            (3, 0, ""),
        ),
        # one product left as it was (its wgmma could not be read): the candidate's doing
        (
            (
                "HGMMA.64x64x16.F32.BF16 R88, gdesc[UR4].negA, RZ, !UPT",
                "HGMMA.64x128x16.F32.BF16 R24, R132, gdesc[UR4].tnspB, R24, gsb0",
                "@P0 QGMMA.64x128x32.F32.E4M3.E4M3 R88, gdesc[UR20].negA, R88",
                "FFMA R1, R2, R3, R4",
            ),
            (3, 1, ""),
        ),
        # a product changed in more than its sign is not negated; another instruction changed is said
        (
            (
                "HGMMA.64x64x16.F32.BF16 R88, gdesc[UR4].negA, R88, !UPT",
                "HGMMA.64x128x16.F32.BF16 R24, -R132, gdesc[UR4].tnspB, R24, gsb0",
                "@P0 QGMMA.64x128x32.F32.E4M3.E4M3 R88, gdesc[UR20].negA, R88",
                "FFMA R1, R2, R3, R5",
            ),
            (3, 1, "the negated SASS differs in 1 other instructions"),
        ),
    ],
)
def test_the_negated_sass_must_be_the_original_with_every_product_negated(
    negated: tuple[str, ...], expected: tuple[int, int, str]
) -> None:
    assert products_not_negated(_listing(*ORIGINAL), _listing(*negated)) == expected


def test_an_integer_wgmma_has_no_scale_and_is_left() -> None:
    ptx = "wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8 {%r1, %r2, %r3, %r4}, %rd1, %rd2, p;\n"
    assert negate_products(ptx) == ptx


def test_the_ptxas_command_is_read_from_nvccs_dry_run_with_nvccs_own_ptxas(tmp_path: Path) -> None:
    """The program is found on the PATH the dry run sets (nvcc's own bin folder first), not the caller's."""
    toolkit = tmp_path / "toolkit" / "bin"
    toolkit.mkdir(parents=True)
    (toolkit / "ptxas").write_text("#!/bin/sh\n")
    (toolkit / "ptxas").chmod(0o755)
    dry_run = (
        f'#$ _NVVM_BRANCH_=nvvm\n#$ PATH={toolkit}\n#$ cicc -arch compute_90a "kernel.cu"\n'
        '#$ ptxas -arch=sm_90a -m64 -v  --generate-line-info "keep/kernel.ptx"  -o "keep/kernel.cubin" \n'
        '#$ fatbinary --create="keep/kernel.fatbin" -64\n'
    )
    assert ptxas_line(dry_run, "keep/kernel.ptx", "keep/kernel.cubin") == [
        str(toolkit / "ptxas"), "-arch=sm_90a", "-m64", "-v", "--generate-line-info", "keep/kernel.ptx", "-o",
        "keep/kernel.cubin",
    ]  # fmt: skip
    assert ptxas_line(dry_run, "keep/other.ptx", "keep/kernel.cubin") is None
    assert (
        ptxas_line(
            dry_run.replace(str(toolkit), str(tmp_path / "none")), "keep/kernel.ptx", "keep/kernel.cubin"
        )
        is None
    )


def _sass(path: str) -> list[str]:
    """The instructions cuobjdump lists, without their encodings or column padding."""
    cuobjdump = find_tool("cuobjdump")
    assert cuobjdump is not None
    listing = subprocess.run([str(cuobjdump), "-sass", path], capture_output=True, text=True, check=True)
    lines = (
        " ".join(re.sub(r"/\* 0x[0-9a-f]+ \*/", "", line).split()) for line in listing.stdout.splitlines()
    )
    return [line for line in lines if line]


@needs_nvcc
def test_the_negated_library_is_the_original_with_every_product_negated(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Built with the wgmma GEMM: the same size, different only inside the cubin's bytes, and its SASS is
    the original's line for line but that every HGMMA negates A (so the build's own ptxas command made it:
    the negation is the only difference)."""
    cache = session_cache(tmp_path_factory)
    built = build_kernel("wgmma_gemm.cu", "hopper", cache)
    assert built.negated_library_path is None  # made only when the GPU tiers ask for it
    stage = asyncio.run(with_negated(built, get_target("hopper"), cache))
    assert stage.status == Status.passed and stage.negated_note == ""
    assert stage.library_path and stage.negated_library_path and stage.cubin_path
    original, negated = Path(stage.library_path).read_bytes(), Path(stage.negated_library_path).read_bytes()
    cubin = Path(stage.cubin_path).read_bytes()
    assert len(negated) == len(original) and negated != original
    start = original.index(cubin)
    differing = [i for i, (a, b) in enumerate(zip(original, negated, strict=True)) if a != b]
    assert start <= differing[0] and differing[-1] < start + len(cubin)
    before, after = _sass(stage.library_path), _sass(stage.negated_library_path)
    products = [line for line in after if "HGMMA" in line]
    assert products and all("gdesc[" in line and ".negA" in line for line in products)
    assert [line.replace(".negA", "") for line in after] == before


@needs_nvcc
def test_the_negated_twin_is_made_once_and_a_kernel_without_wgmma_has_none(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    cache = session_cache(tmp_path_factory)
    hopper = get_target("hopper")
    built = build_kernel("wgmma_gemm.cu", "hopper", cache)
    first = asyncio.run(with_negated(built, hopper, cache))
    assert first.negated_library_path is not None
    made = Path(first.negated_library_path).stat().st_mtime_ns
    again = asyncio.run(with_negated(built, hopper, cache))
    assert again.negated_library_path == first.negated_library_path
    assert Path(first.negated_library_path).stat().st_mtime_ns == made
    simt = asyncio.run(with_negated(build_kernel("mma_sync_gemm.cu", "hopper", cache), hopper, cache))
    assert simt.negated_library_path is None and simt.negated_note == "its PTX holds no wgmma"
    assert not simt.negated_hidden


@needs_nvcc
def test_a_product_written_in_an_odd_form_is_negated_all_the_same(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The wgmma GEMM with its imm-scale-a a constant expression behind a comment holding a `;`: ptxas
    assembles it, and its twin's SASS has every HGMMA negated (the comparison that would refuse it, where
    one still ran un-negated, is the test above's)."""
    cache = session_cache(tmp_path_factory)
    source = (KERNELS / "wgmma_gemm.cu").read_text()
    odd = source.replace("%32, %33, 1, 1, 1, 0, 0;", "%32, %33, 1, /* ; */ (3 - 2), 1, 0, 0;")
    assert odd != source
    hopper = get_target("hopper")
    built = asyncio.run(build(odd, hopper, 300, cache))
    assert built.status == Status.passed, built.errors
    stage = asyncio.run(with_negated(built, hopper, cache))
    assert stage.negated_note == "" and not stage.negated_hidden and stage.negated_library_path
    products = [line for line in _sass(stage.negated_library_path) if "HGMMA" in line]
    assert products and all(".negA" in line for line in products)
