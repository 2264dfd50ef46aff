"""Every pattern of every knowledge pack is a program nvcc builds here for its target: with the pack's
headers and topic code blocks, its shared memory asserted against the per-block limit (and at the
most stages that fit), no spills and no serialised wgmma in the ptxas report, the tensor-core
instructions in its SASS. Also the pack's sizing tables and its setmaxnreg rule, recomputed."""

from __future__ import annotations

import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.pack_support import (
    ABI,
    FIRST_STEP_MUTANTS,
    HOPPER_HARNESSES,
    SMEM_LIMIT,
    cuda_blocks,
    harness_command,
    harness_dir,
    header_dirs,
    library_blocks,
    pattern_kernel,
    pattern_paths,
    pattern_unit,
)
from workbench.evaluate.gpu.toolchain import find_tool
from workbench.knowledge import load_pack
from workbench.paths import knowledge_packs_dir
from workbench.tasks.targets import get_target

TARGETS = ("hopper", "blackwell")
# Patterns that are outlines (no ```cuda block) and say so in their first lines.
OUTLINES: set[str] = set()
# The instructions each target's patterns must compile to.
OPCODES = {"hopper": ("HGMMA.64x", "UTMALDG", "SYNCS"), "blackwell": ("UTCHMMA", "UTCBAR", "LDTM", "UTMALDG")}
# What each pattern adds: the TMA-store epilogues, the pair forms, P written back to TMEM.
PATTERN_OPCODES = {
    "hopper/patterns/cluster_multicast.md": ("STSM", "UTMASTG"),
    "hopper/patterns/fa3_forward.md": ("STSM", "UTMASTG"),
    "blackwell/patterns/warp_specialization.md": ("UTMASTG",),
    "blackwell/patterns/cluster_multicast.md": (
        "UTCHMMA.2CTA",
        "UTCBAR.2CTA.MULTICAST",
        "UTMALDG.2D.2CTA",
        "UTMASTG",
    ),
    "blackwell/patterns/fa4_forward.md": ("STTM", "UTMASTG"),
}
STAGES = re.compile(r"\b(\w+_STAGES) = (\d+)\b")

needs_nvcc = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")


def nvcc(source: Path, target: str, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        str(find_tool("nvcc")),
        "-std=c++17",
        "-O2",
        "-gencode",
        get_target(target).gencode,
        *(f"-I{d}" for d in header_dirs(target)),
        *extra,
        "-o",
        str(out),
        str(source),
    ]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600)


def compiled_patterns() -> list[tuple[str, str]]:
    return [
        (target, path)
        for target in TARGETS
        for path in pattern_paths(target).values()
        if path not in OUTLINES
    ]


@pytest.fixture(scope="module")
def pattern_builds(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[tuple[str, str], tuple[subprocess.CompletedProcess[str], Path]]:
    """Every pattern compiled once to a cubin with the ptxas report, two at a time (CI has 2 cores)."""
    out = tmp_path_factory.mktemp("pack-patterns")

    def one(item: tuple[str, str]) -> tuple[subprocess.CompletedProcess[str], Path]:
        target, path = item
        stem = path.replace("/", "_").removesuffix(".md")
        source = out / f"{stem}.cu"
        source.write_text(pattern_unit(target, path))
        cubin = out / f"{stem}.cubin"
        return nvcc(source, target, cubin, "-cubin", "-Xptxas", "-v"), cubin

    items = compiled_patterns()
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(items, pool.map(one, items), strict=True))


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


def test_every_pattern_is_one_kernel_or_a_declared_outline() -> None:
    for target in TARGETS:
        for path in pattern_paths(target).values():
            blocks = cuda_blocks(path)
            if path in OUTLINES:
                assert not blocks, f"{path} is listed as an outline but has cuda code"
                assert "outline" in (knowledge_packs_dir() / path).read_text().lower()
            else:
                assert len(blocks) == 1, f"{path}: {len(blocks)} cuda blocks"
                assert "__global__" in blocks[0]


def test_every_cuda_block_of_a_pack_is_compiled_by_a_test() -> None:
    """A ```cuda block in a topic file is compiled into every pattern's translation unit (the ABI
    example through the build stage, in test_pack_headers.py); nothing else may carry the label."""
    for target in TARGETS:
        topics = [f.path for f in load_pack(target).files if f.kind == "topic"]
        compiled = set(library_blocks(target))
        for path in topics:
            for block in cuda_blocks(path):
                assert path == ABI or block in compiled, path


def test_every_pattern_asserts_its_shared_memory_against_the_limit() -> None:
    for target, path in compiled_patterns():
        code = pattern_kernel(path)
        assert re.search(rf"static_assert\(\w+_SMEM_BYTES <= {SMEM_LIMIT},", code), path
        assert STAGES.search(code), f"{path}: no <NAME>_STAGES constant"


@needs_nvcc
@pytest.mark.parametrize(("target", "path"), compiled_patterns())
def test_pattern_builds_without_spills_or_serialised_wgmma(
    target: str,
    path: str,
    pattern_builds: dict[tuple[str, str], tuple[subprocess.CompletedProcess[str], Path]],
) -> None:
    done, cubin = pattern_builds[(target, path)]
    assert done.returncode == 0, done.stderr
    report = done.stderr
    entries = re.findall(r"Compiling entry function '(\w+)'", report)
    assert entries, report
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    assert len(spills) >= len(entries), report
    assert all(s == ("0", "0") for s in spills), report
    assert "Potential Performance Loss" not in report, report  # serialised wgmma, ignored setmaxnreg
    if find_tool("cuobjdump") is not None:
        code = sass(cubin)
        for opcode in OPCODES[target] + PATTERN_OPCODES.get(path, ()):
            assert opcode in code, f"{path}: no {opcode}"


@needs_nvcc
@pytest.mark.parametrize(("target", "path"), compiled_patterns())
def test_one_more_stage_does_not_fit(target: str, path: str, tmp_path: Path) -> None:
    """Each pattern runs at the most stages its shared memory allows: one more trips its
    static_assert (so the assertion is live and the stage count is the table's maximum)."""
    unit = pattern_unit(target, path)
    name, stages = STAGES.search(pattern_kernel(path)).groups()  # type: ignore[union-attr]
    bigger = unit.replace(f"{name} = {stages}", f"{name} = {int(stages) + 1}", 1)
    assert bigger != unit
    source = tmp_path / "bigger.cu"
    source.write_text(bigger)
    # -cuda runs only the front end: enough for a static_assert, seconds instead of a ptxas run.
    done = nvcc(source, target, tmp_path / "bigger.cpp", "-cuda")
    assert done.returncode != 0
    assert "static assertion failed" in done.stderr and "232,448" in done.stderr, done.stderr


def _sizing_table(path: str) -> tuple[list[str], list[list[str]]]:
    text = (knowledge_packs_dir() / path).read_text()
    lines = text[text.index("**Shared-memory sizing") :].split("\n\n")[1].splitlines()
    header, *rows = ([c.strip() for c in line.strip("|").split("|")] for line in lines)
    return header, rows[1:]  # rows[0] is the |---| rule


ENTRY = re.compile(r"(\d+) (?:with [^(;]*)?\((?:(\d+) KiB, )?([\d,]+) B\)")


@pytest.mark.parametrize("target", TARGETS)
def test_sizing_table_is_arithmetic(target: str) -> None:
    """Every entry 'N (... B)' of the overview's table is the most stages whose total (stages x
    (stage + 16 B of mbarriers) + C staging + 1,024 B of alignment slack) fits the limit, and each
    stage is (rows of A + rows of B per CTA) x BK x 2 bytes."""
    header, rows = _sizing_table(f"{target}/00_overview.md")
    assert len(rows) == 3
    entries = 0
    for tile, stage_text, *cells in rows:
        bm, bn, bk = (int(x) for x in re.match(r"(\d+)x(\d+)x(\d+)", tile).groups())  # type: ignore[union-attr]
        rows_per_cta = (bm + bn) // 2 if "pair" in tile else bm + bn
        stage = int(stage_text.replace(",", ""))
        assert stage == rows_per_cta * bk * 2, tile
        for column, cell in zip(header[2:], cells, strict=True):
            column_staging = re.search(r"(\d+) KiB", column)
            for count, kib, total in ENTRY.findall(cell):
                staging = int(kib or (column_staging.group(1) if column_staging else 0)) * 1024
                need = int(count) * (stage + 16) + staging + 1024
                assert need == int(total.replace(",", "")), (tile, cell)
                assert need <= SMEM_LIMIT < need + stage + 16, (tile, cell)
                entries += 1
    assert entries >= 6


@needs_nvcc
def test_setmaxnreg_needs_a_register_count_at_entry(tmp_path: Path) -> None:
    """The Hopper pack's rule, measured: without bounds ptxas drops setmaxnreg (C7508); a light kernel
    with __launch_bounds__(384) alone drops it too; (384, 1) keeps it."""
    body = (
        "k(float* out) {\n"
        '  if (threadIdx.x / 128 == 0) { asm volatile("setmaxnreg.dec.sync.aligned.u32 40;"); return; }\n'
        '  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");\n'
        "  out[threadIdx.x] = 1.f;\n}\n"
    )
    ignored = {}
    for bounds in ("", "__launch_bounds__(384)", "__launch_bounds__(384, 1)"):
        source = tmp_path / "k.cu"
        source.write_text(f"__global__ void {bounds} {body}")
        done = nvcc(source, "hopper", tmp_path / "k.cubin", "-cubin", "-Xptxas", "-v")
        assert done.returncode == 0, done.stderr
        ignored[bounds] = "C7508" in done.stderr
    assert ignored == {"": True, "__launch_bounds__(384)": True, "__launch_bounds__(384, 1)": False}
    text = (knowledge_packs_dir() / "hopper" / "registers_and_warp_specialization.md").read_text()
    assert "`__launch_bounds__(T, 1)` reserves 65536/T" in text


@needs_nvcc
def test_mixing_cta_groups_is_a_compile_error(tmp_path: Path) -> None:
    """blackwell/debugging.md: ptxas rejects cta_group::1 and ::2 in one kernel."""
    source = tmp_path / "mix.cu"
    source.write_text(
        "#include <cstdint>\n__global__ void mix(uint32_t* out) {\n  __shared__ uint32_t s;\n"
        "  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(&s));\n"
        '  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(a));\n'
        '  asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(a));\n'
        "  *out = s;\n}\n"
    )
    done = nvcc(source, "blackwell", tmp_path / "mix.cubin", "-cubin")
    assert done.returncode != 0
    assert "cta_group::1" in done.stderr and "not allowed" in done.stderr, done.stderr


def test_every_compiled_hopper_pattern_has_a_gpu_program() -> None:
    hopper = {path for target, path in compiled_patterns() if target == "hopper"}
    assert set(HOPPER_HARNESSES) == hopper
    assert all(h.is_file() for h in HOPPER_HARNESSES.values())


@pytest.mark.parametrize("pattern", sorted(FIRST_STEP_MUTANTS))
def test_first_step_mutant_sites_exist(pattern: str, tmp_path: Path) -> None:
    """The GPU test's mutants must change the code (harness_dir asserts the site is there once)."""
    poisoned = (harness_dir("hopper", pattern, tmp_path) / "pattern_kernel.cuh").read_text()
    mutant = (harness_dir("hopper", pattern, tmp_path, mutant=True) / "pattern_kernel.cuh").read_text()
    assert poisoned != mutant and "0x7fc00000" in poisoned


# Slow: each pattern's kernel is built for spills and serialised wgmma by the test above; the harness
# around it is the GPU test's, which builds it before anything runs.
@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("pattern", sorted(HOPPER_HARNESSES))
def test_poisoned_gpu_program_builds_clean_here(pattern: str, tmp_path: Path) -> None:
    """The H200 test's program, with the pattern poisoned, builds here without spills or serialised
    wgmma, so the GPU run can fail only on the GPU's verdict."""
    harness = HOPPER_HARNESSES[pattern]
    cmd = harness_command(
        "hopper", harness, harness_dir("hopper", pattern, tmp_path), tmp_path / "h", "-Xptxas", "-v"
    )
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "Potential Performance Loss" not in done.stderr, done.stderr
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", done.stderr)
    assert spills and all(s == ("0", "0") for s in spills), done.stderr
