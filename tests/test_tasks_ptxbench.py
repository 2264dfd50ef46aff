"""PTXBench's published per-turn results import with every run's task in the catalogue.

Its data (zhang677/PTXBench @ 491860b, benchmark/plot_viewer_v1/data/reasoning_tokens_vs_performance.csv)
names 16 definitions; its repository's problem sets (fib_runtime/multiturn/*-problems) add the FP8
and gated delta-net ones. An imported run of any of them must match a catalogue task, so that reports
set it beside the workbench's own runs of that task.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from workbench.bench.ptxbench import COLUMNS, read_per_turn
from workbench.tasks import Catalogue

PUBLISHED = [
    "gemm_n7168_k5120",
    *(f"mha_with_lse_d{d}{c}" for d in (64, 96, 128) for c in ("", "_causal")),
    *(f"mha_bwd_d{d}{c}" for d in (64, 96, 128) for c in ("", "_causal")),
    "gqa_paged_decode_h24_kv8_d128_ps1",
    "gqa_paged_prefill_causal_h24_kv8_d128_ps1",
    "gqa_ragged_prefill_causal_h32_kv4_d128",
]
REPOSITORY = [
    "fp8_gemm_nt_1d2d_n4096_k7168",
    *(f"fp8_mha_with_lse_d{d}{c}" for d in (64, 96, 128, 256) for c in ("", "_causal")),
    "gdn_decode_qk4_v8_d128_k_last",
    "gdn_decode_qk8_v16_d128_k_last",
    "gdn_mtp_qk4_v8_d128_k_last",
]
PUBLISHED_CSV = (
    Path(__file__).resolve().parent.parent.parent
    / "shared"
    / "fixtures"
    / "ptxbench"
    / ("reasoning_tokens_vs_performance.csv")
)


def per_turn(path: Path, definitions: list[str]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for number, definition in enumerate(definitions):
            arch = "hopper" if number % 2 else "blackwell"
            for turn in range(2):
                correct = "Correct" if turn else "Compilation error"
                writer.writerow(
                    ["Model", arch, definition, f"/runs/r{number}", "exp_000", turn, correct, "0.8", turn]
                )
    return path


def test_every_task_ptxbench_names_is_a_catalogue_task(tmp_path: Path) -> None:
    records = read_per_turn(per_turn(tmp_path / "per_turn.csv", PUBLISHED + REPOSITORY))
    assert len(records) == len(PUBLISHED) + len(REPOSITORY)
    catalogue = Catalogue.load()
    unknown = sorted({record.key.task for record in records} - set(catalogue.tasks))
    assert not unknown, f"imported runs name no catalogue task: {unknown}"
    for record in records:  # the task's own required family answers the run's SASS question
        task = catalogue.get(record.key.task)
        assert task.target(record.key.target).required_family


@pytest.mark.skipif(not PUBLISHED_CSV.is_file(), reason=f"PTXBench's per-turn data is not at {PUBLISHED_CSV}")
def test_ptxbenchs_published_per_turn_data_names_no_unknown_task() -> None:
    records = read_per_turn(PUBLISHED_CSV)
    names = {record.key.task for record in records}
    assert set(PUBLISHED) == names
    assert not names - set(Catalogue.load().tasks)
