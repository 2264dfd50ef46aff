"""Per-instruction counts: ncu's source page parsed by column name, and placed on real cuobjdump listings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from build_support import needs_nvcc
from source_page_support import COLUMNS, block, built_wgmma_gemm, invented_counts, listing_kernels

from workbench.evaluate.gpu.profile import import_commands, ncu_command
from workbench.evaluate.gpu.source_counters import (
    SourcePageError,
    listing_instructions,
    match_listing,
    opcode_of,
    own_kernels,
    parse_source_page,
    stored,
)
from workbench.evaluate.gpu.toolchain import find_tool
from workbench.evaluate.result import DynamicStage, InstructionCounts

DATA = Path(__file__).parent / "data"
PROBE = (DATA / "tui" / "families_probe.sm_90a.sass").read_text()  # one kernel with HGMMA, SYNCS, UTMA*
TMA = (DATA / "sass" / "tma_copy.sm_90a.sass").read_text()
PROBE_KERNEL = "_Z14families_probePfmm"
(TMA_KERNEL,) = listing_kernels(TMA)
# How ncu 2025.3 names them on the page: demangled, its own spacing (the probe's `__nv_bfloat16 *`).
PROBE_NAME = "families_probe(float *, unsigned long, unsigned long)"
TMA_NAME = "<unnamed>::tma_copy(CUtensorMap_st, CUtensorMap_st)"


def probe_rows() -> list:
    return listing_kernels(PROBE)[PROBE_KERNEL]


def test_two_kernels_and_a_second_launch_parse_by_column_name_with_thousands_separators() -> None:
    probe, tma = probe_rows(), listing_kernels(TMA)[TMA_KERNEL]
    page = (
        "==PROF== Connected to process 948\n"
        + block(PROBE_NAME, probe)
        + block(TMA_NAME, tma, address=lambda offset: str(0x7F2A3C009000 + offset))  # decimal
        + block(PROBE_NAME, probe, address=lambda offset: f"0x{0x7F2A3C001200 + offset:016x}")
    )
    parsed = parse_source_page(page)
    assert list(parsed) == [PROBE_NAME, TMA_NAME]
    rows = parsed[PROBE_NAME]
    assert [row.offset for row in rows] == [offset for offset, _ in probe]  # from the first instruction
    executed, threads, predicated_on = invented_counts(5, probe[5][1])
    assert executed > 1000  # printed with a separator
    assert (rows[5].executed, rows[5].threads, rows[5].predicated_on) == (
        2 * executed,
        2 * threads,
        2 * predicated_on,
    )  # both launches of the one call
    assert [row.opcode for row in rows].count("HGMMA") == 1
    assert [row.offset for row in parsed[TMA_NAME]] == [offset for offset, _ in tma]
    assert parsed[TMA_NAME][0].executed == 1_000_000


def test_columns_are_found_by_name_whatever_their_order() -> None:
    shuffled = [COLUMNS[7], COLUMNS[0], *COLUMNS[8:], COLUMNS[5], COLUMNS[1], COLUMNS[6]]
    parsed = parse_source_page(block(PROBE_NAME, probe_rows(), columns=shuffled))
    reference = parse_source_page(block(PROBE_NAME, probe_rows()))
    assert parsed == reference


def test_a_page_without_addresses_keeps_the_order_and_offsets_are_unknown() -> None:
    (rows,) = parse_source_page(block(PROBE_NAME, probe_rows(), address=lambda offset: "")).values()
    assert all(row.offset is None for row in rows)
    assert [row.opcode for row in rows] == [opcode_of(sass) for _, sass in probe_rows()]
    match = match_listing(listing_instructions(PROBE.splitlines()), {PROBE_KERNEL: rows})
    assert match.by_order == [PROBE_KERNEL] and match.matched == len(rows)


def test_a_page_without_source_counters_is_one_clear_line() -> None:
    without = [column for column in COLUMNS if column != "Instructions Executed"]
    with pytest.raises(SourcePageError, match="no 'Instructions Executed' column") as caught:
        parse_source_page(block(PROBE_NAME, probe_rows(), columns=without))
    assert "\n" not in str(caught.value)
    page = block(PROBE_NAME, probe_rows()).replace('"1,000,000"', '"lots"', 1)
    with pytest.raises(SourcePageError, match="'lots' is not a number"):
        parse_source_page(page)
    assert parse_source_page("") == {} and parse_source_page("==PROF== Disconnected\n") == {}


def test_opcodes_drop_predicates_and_modifiers() -> None:
    assert opcode_of("@!UP0 SYNCS.EXCH.64 URZ, [UR6], UR4") == "SYNCS"
    assert opcode_of("@PT HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24, gsb0 ;") == "HGMMA"
    assert opcode_of("  EXIT ;") == "EXIT"
    assert opcode_of("") == ""


def test_only_the_candidates_own_kernels_are_kept_by_their_mangled_names() -> None:
    probe, tma = probe_rows(), listing_kernels(TMA)[TMA_KERNEL]
    foreign = block("nvjet_sm90_tst_256x128_64x4_2x1_v_bz_coopA_TNT", probe)
    demangled = {
        PROBE_KERNEL: "families_probe(float*, unsigned long, unsigned long)",  # c++filt's spacing
        TMA_KERNEL: "(anonymous namespace)::tma_copy(CUtensorMap_st, CUtensorMap_st)",
    }
    own = {PROBE_KERNEL, TMA_KERNEL}
    # ncu's demangled names: its spacing, its name for the anonymous namespace.
    page = parse_source_page(block(PROBE_NAME, probe) + foreign + block(TMA_NAME, tma))
    assert {k: len(v) for k, v in own_kernels(page, own, demangled).items()} == {
        PROBE_KERNEL: len(probe),
        TMA_KERNEL: len(tma),
    }
    # Printed mangled (`--print-kernel-base mangled`): the names are the cubin's.
    page = parse_source_page(block(PROBE_KERNEL, probe) + foreign + block(TMA_KERNEL, tma))
    assert set(own_kernels(page, own, demangled)) == own
    # Another signature of the one function name is still that kernel; another function is not.
    page = parse_source_page(block("void families_probe<128>(float *, int)", probe))
    assert set(own_kernels(page, own, demangled)) == {PROBE_KERNEL}
    assert own_kernels(page, {"_Z5otherv"}, {"_Z5otherv": "other()"}) == {}


def test_rows_land_on_their_listing_lines_by_offset() -> None:
    counts = parse_source_page(block(PROBE_NAME, probe_rows()))
    lines = PROBE.splitlines()
    match = match_listing(listing_instructions(lines), {PROBE_KERNEL: counts[PROBE_NAME]})
    assert match.matched == match.rows == len(probe_rows()) and match.by_order == []
    hgmma = [index for index, line in enumerate(lines) if "HGMMA" in line]
    assert len(hgmma) == 1 and all(match.lines[index].opcode == "HGMMA" for index in hgmma)
    assert all(f"/*{row.offset:04x}*/" in lines[index] for index, row in match.lines.items())


def test_rows_whose_offsets_disagree_are_placed_by_order_and_opcode() -> None:
    shifted = parse_source_page(block(PROBE_NAME, probe_rows(), address=lambda offset: f"0x{offset * 2:x}"))
    (rows,) = shifted.values()
    missing_one = rows[:10] + rows[11:]  # ncu left one instruction out
    match = match_listing(listing_instructions(PROBE.splitlines()), {PROBE_KERNEL: missing_one})
    assert match.by_order == [PROBE_KERNEL]
    assert match.rows == len(missing_one) and match.matched >= len(missing_one) - 1
    lines = PROBE.splitlines()
    assert all(row.opcode in lines[index] for index, row in match.lines.items())


def test_a_kernel_the_listing_lacks_places_nothing() -> None:
    counts = parse_source_page(block(PROBE_NAME, probe_rows()))
    match = match_listing(listing_instructions(TMA.splitlines()), {PROBE_KERNEL: counts[PROBE_NAME]})
    assert match.matched == 0 and match.rows == 0


def test_the_stage_keeps_counts_and_older_stages_load_without_them() -> None:
    (rows,) = parse_source_page(block(PROBE_NAME, probe_rows())).values()
    stage = DynamicStage.model_validate({"status": "passed", "source_counts": {PROBE_KERNEL: stored(rows)}})
    assert isinstance(stage.source_counts[PROBE_KERNEL][0], InstructionCounts)
    assert stage.source_counts[PROBE_KERNEL][0].executed == rows[0].executed
    assert DynamicStage.model_validate({"status": "passed"}).source_counts == {}
    match = match_listing(listing_instructions(PROBE.splitlines()), stage.source_counts)
    assert match.matched == len(rows)


# The command line of every evaluation without source counters, as it was before they existed.
PLAIN = [
    "ncu", "--clock-control", "none", "--target-processes", "all", "--profile-from-start", "off",
    "--print-kernel-base", "mangled", "--metrics",
    "sass__thread_inst_executed_true_per_opcode,gpu__time_duration.sum,sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum",
    "--section", "LaunchStats", "--page", "raw", "--csv", "--print-units", "base",
    "--print-metric-instances", "details", "--log-file", "/tmp/run/ncu.log", "python", "x.py",
]  # fmt: skip


def test_the_ncu_command_is_unchanged_without_source_counters_and_exports_a_report_with_them() -> None:
    assert ncu_command("ncu", "/tmp/run/ncu.log", "hopper", ["python", "x.py"]) == PLAIN
    counted = ncu_command("ncu", "/tmp/run/ncu.log", "hopper", ["python", "x.py"], source_counters=True)
    assert "SourceCounters" == counted[counted.index("SourceCounters")]
    assert counted[counted.index("SourceCounters") - 1] == "--section"
    assert counted[counted.index("-o") + 1] == "/tmp/run/profile.ncu-rep"  # the tool's own folder
    assert "--page" not in counted  # the pages are printed from the report afterwards
    assert counted[-2:] == ["python", "x.py"] and "LaunchStats" in counted
    raw, source = import_commands("ncu", "/tmp/run/profile.ncu-rep")
    assert raw[:3] == ["ncu", "-i", "/tmp/run/profile.ncu-rep"] and PLAIN[-11:-4] == raw[-7:]
    assert raw[raw.index("--print-kernel-base") + 1] == "mangled"  # as the own-kernel filter reads names
    assert source[source.index("--page") + 1] == "source" and source[-2:] == ["--print-source", "sass"]


needs_cuobjdump = pytest.mark.skipif(find_tool("cuobjdump") is None, reason="cuobjdump is not installed")


@needs_nvcc
@needs_cuobjdump
def test_a_whole_wgmma_gemm_built_here_is_matched_instruction_by_instruction(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    _, listing = built_wgmma_gemm(tmp_path_factory)
    kernels = listing_kernels(listing)
    page = "".join(block(kernel, rows) for kernel, rows in kernels.items())
    parsed = parse_source_page(page)
    match = match_listing(listing_instructions(listing.splitlines()), parsed)
    total = sum(map(len, kernels.values()))
    assert total > 100 and match.matched == match.rows == total and match.by_order == []
    lines = listing.splitlines()
    assert any("HGMMA" in lines[index] and row.executed > 0 for index, row in match.lines.items())


PTXWB = Path(sys.executable).parent / "ptxwb"


@pytest.mark.parametrize("command", ["eval", "run", "author"])
def test_asking_the_static_executor_for_counts_is_one_line_of_bad_input(tmp_path: Path, command: str) -> None:
    kernel = tmp_path / "k.cu"
    kernel.write_text("// a kernel\n")
    args = {
        "eval": ["eval", str(kernel)],
        "run": ["run", "--model", "scripted:none.json", "--headless"],
        "author": ["author", str(kernel)],
    }[command]
    done = subprocess.run(
        [str(PTXWB), *args, "--task", "gemm_n7168_k5120", "--source-counters"],
        check=False,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PTXWB_CACHE": str(tmp_path)},
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines() == [
        (
            "ptxwb: --source-counters counts what the profiled call executed: it needs a GPU executor "
            "(--executor local or ssh://HOST), not static"
        )
    ]
