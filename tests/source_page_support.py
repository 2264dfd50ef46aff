"""Nsight Compute source pages written by hand for the tests, shaped as ncu 2025.3 prints them on the H200.

The columns are those the probe recorded (benchmarks/results/2026-11-29_gpu_probe.log: `ncu -i R
--page source --csv --print-source sass` after `--section SourceCounters`); the rows are made from a
real cuobjdump listing, so offsets and opcodes are the compiler's. The counts are invented.
"""

from __future__ import annotations

import asyncio
import csv
import io
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from build_support import build_kernel, session_cache

from workbench.evaluate.build.sass import disassemble
from workbench.evaluate.gpu.source_counters import parse_source_page, stored
from workbench.evaluate.result import BuildStage, InstructionCounts

# The probe's header, as far as the log kept it, and two of the columns after it.
COLUMNS = [
    "Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
    "# Samples", "Instructions Executed", "Thread Instructions Executed",
    "Predicated-On Thread Instructions Executed", "Avg. Threads Executed",
    "Avg. Predicated-On Threads Executed", "Avg. Predicated-On Threads Unexecuted", "Divergent Branches",
    "Address Space", "Access Operation", "Access Size", "L1 Tag Requests Global",
    "L1 Conflicts Shared N-Way", "L1 Wavefronts Shared Excessive", "L1 Wavefronts Shared",
    "L1 Wavefronts Shared Ideal", "L2 Theoretical Sectors Global Excessive", "L2 Theoretical Sectors Global",
    "L2 Theoretical Sectors Global Ideal", "L2 Explicit Evict Policies", "L2 Explicit Hit Policy Evict First",
    "L2 Explicit Hit Policy Evict Last", "L2 Explicit Hit Policy Evict Normal",
    "L2 Explicit Hit Policy Evict Normal Demote", "L2 Explicit Miss Policy Evict First",
    "L2 Explicit Miss Policy Evict Normal", "stall_barrier", "stall_branch_resolving", "stall_dispatch",
    "stall_drain", "stall_imc", "stall_lg", "stall_long_sb", "stall_math", "stall_membar", "stall_mio",
    "stall_misc", "stall_no_inst", "stall_not_selected", "stall_selected", "stall_short_sb", "stall_sleep",
    "stall_tex", "stall_wait", "stall_barrier (Not Issued)", "stall_wait (Not Issued)",
]  # fmt: skip

_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/\s+(.*?)\s*;")
_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")

Instruction = tuple[int, str]  # offset, SASS text as ncu prints it (no address, no encoding)
Counts = Callable[[int, str], tuple[int, int, int]]  # (index, sass) -> executed, threads, predicated-on


def built_wgmma_gemm(factory: pytest.TempPathFactory) -> tuple[BuildStage, str]:
    """The test GEMM built for Hopper in the run's build cache, and its cuobjdump listing."""
    stage = build_kernel("wgmma_gemm.cu", "hopper", session_cache(factory))
    assert stage.cubin_path is not None, stage.message
    listing = asyncio.run(disassemble(Path(stage.cubin_path))).text
    assert listing is not None
    return stage, listing


def listing_kernels(listing: str) -> dict[str, list[Instruction]]:
    """A cuobjdump listing's kernels (mangled) and their instructions."""
    kernels: dict[str, list[Instruction]] = {}
    current: list[Instruction] | None = None
    for line in listing.splitlines():
        if match := _FUNCTION.match(line):
            current = kernels.setdefault(match.group(1), [])
        elif current is not None and (match := _INSTRUCTION.match(line)):
            current.append((int(match.group(1), 16), match.group(2)))
    return kernels


def invented_counts(index: int, sass: str) -> tuple[int, int, int]:
    """Made-up counts in the millions (so thousands separators appear), distinct per instruction; none for
    the padding after the kernel's end."""
    if sass.startswith("NOP"):
        return 0, 0, 0
    executed = 1_000_000 + 1000 * index
    predicated_off = 32 * index if sass.startswith("@") else 0
    return executed, 32 * executed, 32 * executed - predicated_off


def block(
    name: str,
    instructions: Sequence[Instruction],
    counts: Counts = invented_counts,
    address: Callable[[int], str] = lambda offset: f"0x{0x7F2A3C001200 + offset:x}",
    columns: Sequence[str] = COLUMNS,
    extra: Callable[[int, str], dict[str, str]] = lambda index, sass: {},
) -> str:
    """One launch's part of the page: its kernel line, the header, a row per instruction; `extra` gives
    more cells of a row by column (the warp samples)."""
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    out.write(f'"Kernel Name","{name}",\n')
    writer.writerow(columns)
    for index, (offset, sass) in enumerate(instructions):
        executed, threads, predicated_on = counts(index, sass)
        values = {
            "Address": address(offset),
            "Source": sass,
            "Instructions Executed": f"{executed:,}",
            "Thread Instructions Executed": f"{threads:,}",
            "Predicated-On Thread Instructions Executed": f"{predicated_on:,}",
            "# Samples": "3",
            "Address Space": "Generic",
            **extra(index, sass),
        }
        writer.writerow([values.get(column, "0") for column in columns])
    return out.getvalue()


def stored_counts(
    listing: str, extra: Callable[[int, str], dict[str, str]] = lambda index, sass: {}, launches: int = 1
) -> dict[str, list[InstructionCounts]]:
    """Every kernel of a listing with invented counts (and `extra`'s cells), launched `launches` times in
    the profiled call, as the worker keeps them (its page printed mangled)."""
    kernels = listing_kernels(listing).items()
    page = "".join(block(kernel, rows, extra=extra) for kernel, rows in kernels) * launches
    return {
        kernel: [InstructionCounts.model_validate(row) for row in stored(rows)]
        for kernel, rows in parse_source_page(page).items()
    }
