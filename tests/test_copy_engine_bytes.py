"""A memory-bound task's proof: the copy engine must carry the task's bytes, not run beside ordinary loads.

A paged decode that streams every K and V row through LDG beside one 16-byte bulk copy per CTA
(`tests/gpu/hostile/decode_token_copy.cu`) executes UBLKCP, so the family's presence alone
passed it. ncu counts the bytes ordinary loads fetched (LSU global loads missing L1, LDGSTS); the rule
bounds them against the task's minimum bytes. The metric is asked for only where ncu lists it for the
target's chip (`ncu --query-metrics --chip`, offline): Nsight Compute cannot run here, so a stand-in
prints a listing in its format; the parse below reads the page recorded on the H200 with the column
added as ncu prints it.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from ncu_support import stand_in_ncu

from workbench.evaluate.build.sass import FAMILIES
from workbench.evaluate.gpu.ncu_metrics import listed_metrics, parse_listing
from workbench.evaluate.gpu.profile import (
    MAX_ORDINARY_LOAD_SHARE,
    ORDINARY_LOAD_METRICS,
    dynamic_stage,
    ncu_command,
    ordinary_load_metrics,
    parse_raw_csv,
)
from workbench.evaluate.gpu.worker import Worker
from workbench.evaluate.render import dynamic_lines
from workbench.evaluate.result import DynamicStage

DATA = Path(__file__).parent / "data" / "ncu"
FAMILY_LISTS = {family: sorted(ops) for family, ops in FAMILIES.items()}
MISSES = f"{ORDINARY_LOAD_METRICS[0]}.sum"
# The headline paged decode's minimum bytes (269.5 MB: the KV rows it reads, q, indices, O and LSE).
DECODE_BYTES = 269_490_436.0
# What `ncu --query-metrics --chip gh100` prints: a header, then a base name and its description a line.
LISTING = """\
Device GH100
----------------------------------------------------------------------------------------------------
Metric Name                                                          Metric Description
dram__bytes_read                                                     # of bytes read from DRAM
l1tex__t_bytes_pipe_lsu_mem_global_op_ld                             # of bytes requested for global loads
l1tex__t_bytes_pipe_lsu_mem_global_op_ld_lookup_miss                 # of bytes requested that missed for global loads
l1tex__t_bytes_pipe_lsu_mem_global_op_ldgsts_cache_access            # of bytes requested for LDGSTS.ACCESS
l1tex__t_bytes_pipe_lsu_mem_global_op_atom                           # of bytes requested for global atomics
l1tex__m_xbar2l1tex_read_bytes_mem_global_op_tma_ld                  # of bytes read from L2 into L1TEX M-Stage for TMA loads
"""


def copy_launch(ublkcp_threads: float, fetched: float) -> dict:
    """One profiled decode launch: its bulk copies' thread count and the bytes its ordinary loads fetched."""
    return {
        "name": "decode",
        "opcodes": {"UBLKCP": ublkcp_threads, "LDG": 1000.0, "FFMA": 5e7},
        "tensor_flops": None,
        "tensor_metric": None,
        "time_ns": 70_000.0,
        "launch": {},
        "ordinary_load_bytes": {ORDINARY_LOAD_METRICS[0]: fetched},
    }


def judged(launch: dict, min_bytes: float | None = DECODE_BYTES) -> dict:
    return dynamic_stage([launch], FAMILY_LISTS, "ASYNC_COPY", 8.05e8, "hopper", task_min_bytes=min_bytes)


def test_the_listing_gives_base_names_and_nothing_of_its_header_or_descriptions() -> None:
    names = parse_listing(LISTING)
    assert ORDINARY_LOAD_METRICS[0] in names and "dram__bytes_read" in names
    assert not any(" " in name or name.startswith(("Device", "Metric")) for name in names)
    assert len(names) == 6


def test_the_listing_is_asked_offline_for_the_targets_chip_and_empty_when_ncu_cannot_say(
    tmp_path: Path,
) -> None:
    ncu = stand_in_ncu(tmp_path, LISTING)
    assert ORDINARY_LOAD_METRICS[0] in listed_metrics(str(ncu), "hopper")
    assert (tmp_path / "asked").read_text().split() == ["--query-metrics", "--chip", "gh100"]
    assert listed_metrics(str(ncu), "a target with no chip") == frozenset()
    failing = tmp_path / "failing"
    failing.mkdir()
    assert listed_metrics(str(stand_in_ncu(failing, LISTING, exit_code=1)), "hopper") == frozenset()
    assert listed_metrics(str(tmp_path / "no such ncu"), "hopper") == frozenset()


def test_only_a_memory_bound_family_asks_for_the_bytes_and_only_what_ncu_lists() -> None:
    listed = parse_listing(LISTING)
    assert ordinary_load_metrics("ASYNC_COPY", listed) == (
        MISSES,
        "l1tex__t_bytes_pipe_lsu_mem_global_op_ldgsts_cache_access.sum",
        "l1tex__t_bytes_pipe_lsu_mem_global_op_atom.sum",
    )
    assert ordinary_load_metrics("GMMA", listed) == ()
    # Without the metric the rule needs, nothing is asked: an unknown name would fail the whole profile.
    assert ordinary_load_metrics("ASYNC_COPY", listed - {ORDINARY_LOAD_METRICS[0]}) == ()
    command = ncu_command("ncu", "log", "hopper", ["app"], required="ASYNC_COPY", extra_metrics=(MISSES,))
    assert MISSES in command[command.index("--metrics") + 1].split(",")
    plain = ncu_command("ncu", "log", "hopper", ["app"], required="ASYNC_COPY")
    assert MISSES not in plain[plain.index("--metrics") + 1]


def test_the_bytes_column_is_read_from_the_raw_page_as_ncu_prints_it() -> None:
    header, units, row = (DATA / "wgmma_gemm_m256_raw_details.csv").read_text().splitlines()[:3]
    page = "\n".join([f'{header},"{MISSES}"', f'{units},"byte"', f'{row},"1,234,560"'])
    (launch,) = parse_raw_csv(page)
    assert launch["ordinary_load_bytes"] == {ORDINARY_LOAD_METRICS[0]: 1_234_560.0}
    (recorded,) = parse_raw_csv((DATA / "wgmma_gemm_m256_raw_details.csv").read_text())
    assert recorded["ordinary_load_bytes"] == {}


def test_a_decode_streaming_its_kv_through_ldg_beside_a_token_bulk_copy_is_a_decoy() -> None:
    stage = judged(copy_launch(ublkcp_threads=8 * 64, fetched=0.997 * DECODE_BYTES))
    assert stage["status"] == "decoy"
    assert stage["ordinary_load_share"] == pytest.approx(0.997)
    assert (
        "ordinary loads (LDG, LDGSTS, atomics) fetched 100% of the task's minimum bytes" in stage["message"]
    )
    assert f"at most {MAX_ORDINARY_LOAD_SHARE:.0%} allowed" in stage["message"]


def test_a_decode_whose_copy_engine_carries_the_kv_passes_and_says_what_loads_fetched() -> None:
    stage = judged(copy_launch(ublkcp_threads=2 * 65536 * 8, fetched=0.012 * DECODE_BYTES))
    assert stage["status"] == "passed", stage["message"]
    assert "ordinary loads fetched 1.2% of the task's minimum bytes" in stage["message"]
    lines = dynamic_lines(DynamicStage.model_validate({k: v for k, v in stage.items() if k != "message"}))
    assert any(
        "ordinary loads (LDG missing L1, LDGSTS, atomics): 1.2% of the task's minimum" in line
        for line in lines
    )
    # Half the stream by the copy engine and half by LDG (K by TMA, V by LDG) stays below the bound.
    assert judged(copy_launch(2 * 65536 * 4, 0.51 * DECODE_BYTES))["status"] == "passed"


def test_where_the_bytes_were_not_counted_the_verdict_says_so_and_keeps_the_familys_proof() -> None:
    uncounted = copy_launch(ublkcp_threads=512, fetched=0.0)
    uncounted["ordinary_load_bytes"] = {}
    stage = judged(uncounted)
    assert stage["status"] == "passed" and stage.get("ordinary_load_share") is None
    assert f"not judged: this ncu does not list {ORDINARY_LOAD_METRICS[0]}" in stage["message"]
    no_bytes = judged(copy_launch(512, 1e9), min_bytes=None)
    assert no_bytes["status"] == "passed" and "the task states no minimum bytes" in no_bytes["message"]


def test_the_worker_asks_ncu_once_per_target_and_the_bytes_only_for_a_memory_bound_family(
    tmp_path: Path,
) -> None:
    worker = Worker(io.StringIO())
    worker.ncu = str(stand_in_ncu(tmp_path, LISTING))
    assert worker.extra_metrics("hopper", "GMMA") == ()  # this listing has no timed-call counter either
    assert worker.extra_metrics("hopper", "ASYNC_COPY")[0] == MISSES
    assert worker.extra_metrics("hopper", "ASYNC_COPY")[0] == MISSES
    assert len((tmp_path / "asked").read_text().splitlines()) == 1
