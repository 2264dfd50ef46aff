"""The paper's pivot and "only what was measured": metrics a tier never answered are not measured (never
0 %), T defaults to the runs' turn budget, runs of one cell merge, labels hold no host path, and the
terminal, Markdown, HTML and JSON reports show the same numbers."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from bench_support import (
    BUILD_FAILED,
    FIXTURE_MODELS,
    GPU_TIERS,
    STATIC_TIERS,
    gpu_sweep_records,
    store_records,
    turn,
    write_ptxbench_fixture,
)

from workbench.bench.budgets import default_limits, limits_note, observed_budgets
from workbench.bench.formatting import count_text, percent, speedup
from workbench.bench.labels import labelled, model_labels
from workbench.bench.metrics import cell_metrics, compute
from workbench.bench.pivot import NOT_MEASURED, metric_text, pivot
from workbench.bench.ptxbench import import_ptxbench, read_per_turn
from workbench.bench.records import TrajectoryRecord, TurnRow
from workbench.bench.spec import TrajectoryKey

PTXWB = Path(sys.executable).parent / "ptxwb"
CELL = ("run", "model", "hopper", "gemm", "default")


def trajectory(name: str, rows: list[TurnRow]) -> TrajectoryRecord:
    return TrajectoryRecord(TrajectoryKey(*CELL, name), True, "turn_limit", rows)


def test_a_static_sweep_measures_no_correctness_and_says_so() -> None:
    # What a static sweep records: built and statically checked, the GPU tiers never ran.
    records = [
        trajectory("a", [turn(1, "not_run", STATIC_TIERS)]),
        trajectory("b", [turn(1, "not_run", STATIC_TIERS)]),
    ]
    m = cell_metrics(CELL, records, 1)
    assert (m.correct, m.correct_rate, m.correct_ci, m.sass_verified) == (None, None, None, None)
    assert (m.best_speedup, m.n_timed, m.fast_p["0"], m.pass_at_k) == (None, 0, None, {})
    assert m.static_passed == 2 and m.n_trajectories == 2
    assert [metric_text(m, name) for name in ("correct", "sass_verified", "best_speedup")] == [
        NOT_MEASURED
    ] * 3
    assert metric_text(m, "static_passed") == "100%"


def test_a_kernel_that_does_not_build_is_measured_as_not_correct() -> None:
    never_built = [
        trajectory("a", [turn(1, "compile_error", BUILD_FAILED), turn(2, "compile_error", BUILD_FAILED)])
    ]
    m = cell_metrics(CELL, never_built, 2)
    assert (m.correct, m.sass_verified, m.correct_rate) == (0, 0, 0.0)
    assert metric_text(m, "correct") == "0%" and metric_text(m, "best_speedup") == "–"
    # One trajectory whose answer is unknown makes the cell's rate unknown: a rate over the rest would
    # leave out exactly the trajectories that found no correct kernel.
    mixed = [
        *never_built,
        trajectory("b", [turn(1, "compile_error", BUILD_FAILED), turn(2, "not_run", STATIC_TIERS)]),
    ]
    assert cell_metrics(CELL, mixed, 2).correct is None
    assert cell_metrics(CELL, mixed, 1).correct == 0  # within T = 1 both failed to build


def test_a_correct_turn_answers_for_its_trajectory_and_infrastructure_errors_do_not() -> None:
    lost = {**GPU_TIERS, "correctness": "infrastructure_error", "dynamic": "not_run", "timing": "not_run"}
    found = trajectory("a", [turn(1, "infrastructure_error", lost), turn(2, "passed", GPU_TIERS, 0.7)])
    assert cell_metrics(CELL, [found], 2).correct == 1  # turn 1 unknown, but turn 2 was correct
    assert cell_metrics(CELL, [found], 1).correct is None  # at T = 1 only the lost turn counts
    # Correct, but the dynamic tier gave no answer: SASS@T is unknown, correct@T is not.
    unprofiled = {**GPU_TIERS, "dynamic": "infrastructure_error"}
    m = cell_metrics(CELL, [trajectory("b", [turn(1, "infrastructure_error", unprofiled, 0.8)])], 1)
    assert (m.correct, m.sass_verified, m.best_speedup) == (1, None, 0.8)


def test_gpu_sweep_numbers() -> None:
    records = gpu_sweep_records()
    cells = {c.turn_limit: c for c in compute(records, (1, 4))}
    one, four = cells[1], cells[4]
    assert (one.correct, one.sass_verified, one.best_speedup) == (1, 0, 0.5)  # b correct, unverified
    assert (four.correct, four.sass_verified, four.best_speedup) == (2, 1, 0.9)


def test_t_defaults_to_the_runs_turn_budget() -> None:
    records = gpu_sweep_records()
    budgets = observed_budgets(records)
    assert budgets == {"my-sweep": 4} and default_limits(budgets) == [1, 4]
    assert default_limits({"a": 1}) == [1] and default_limits({"a": 2, "b": 8}) == [1, 2]
    assert limits_note({"a": 4}, [1, 4]) is None
    assert (
        limits_note({"a": 2, "b": 8}, [1, 2])
        == "the runs differ in turn budget (2 turns: 1 run, 8 turns: 1 run)"
    )
    # Beyond a run's budget nothing is measured: a 4-turn run has no correct@8.
    beyond = compute(records, (8,), {"my-sweep": 4})[0]
    assert (beyond.correct, beyond.sass_verified, beyond.turn_budget) == (None, None, 4)
    assert (
        limits_note({"my-sweep": 4}, [1, 8])
        == "the runs differ in turn budget (4 turns: 1 run); T = 8 is not measured for 1 of them"
    )


def test_labels_are_names_a_person_chose() -> None:
    labels = model_labels(
        ["scripted:/home/alice/sweep/refs.json", "replay:C:\\runs\\s.jsonl", "openai/gpt-5"]
    )
    assert labels == {"openai/gpt-5": "openai/gpt-5", "replay:C:\\runs\\s.jsonl": "replay:s.jsonl",
                      "scripted:/home/alice/sweep/refs.json": "scripted:refs.json"}  # fmt: skip
    two = model_labels(["scripted:/a/refs.json", "scripted:/b/refs.json"])
    assert len(set(two.values())) == 2 and all(v.startswith("scripted:refs.json #") for v in two.values())
    assert all("/a" not in v and "/b" not in v for v in two.values())
    assert [r.key.model for r in labelled(gpu_sweep_records())] == ["scripted:ladder.json"] * 3


def test_runs_of_one_cell_merge_and_sources_stay_apart(tmp_path: Path) -> None:
    paper = read_per_turn(write_ptxbench_fixture(tmp_path / "per_turn.csv"))
    ours = gpu_sweep_records(model=f"scripted:{tmp_path}/ladder.json")
    budgets = {**observed_budgets(paper), "my-sweep": 4}
    table = pivot([*paper, *ours], 1, 4, budgets)
    hopper = next(t for t in table.targets if t.target == "hopper")
    # This workbench's rows first, then PTXBench's; no row holds a path.
    assert [(r.label, r.source_label) for r in hopper.rows][:2] == [
        ("scripted:ladder.json", "this workbench"), (FIXTURE_MODELS[0], "PTXBench (published)")
    ]  # fmt: skip
    assert all("/" not in r.label for r in hopper.rows)
    # The first model ran Hopper's GEMM twice: one cell, its trajectories pooled.
    gemm = hopper.cells[(hopper.rows[1], "gemm_n7168_k5120")]
    assert gemm.runs == ("m0-hopper-gemm_n7168_k5120-r0", "m0-hopper-gemm_n7168_k5120-r1")
    per_run = {c.run: c for c in compute(paper, (4,)) if c.run in gemm.runs}
    assert gemm.last.n_trajectories == sum(c.n_trajectories for c in per_run.values()) == 12
    assert gemm.last.correct == sum(c.correct or 0 for c in per_run.values())
    assert gemm.last.best_speedup == max(c.best_speedup or 0 for c in per_run.values())
    assert hopper.tasks[0] == "gemm_n7168_k5120" and len(hopper.tasks) == 7
    ours_cell = hopper.cells[(hopper.rows[0], "gemm_n7168_k5120")]
    assert ours_cell.line() == "33% / 67% / 33% / 0.900×"


def _terminal_cells(text: str) -> dict[tuple[str, str, str], str]:
    """(target, model, task) → the cell's text, read back from the printed tables."""
    found: dict[tuple[str, str, str], str] = {}
    target, columns, rows = "", [], []
    for line in text.splitlines():
        if " · each cell:" in line:
            target = line.split(" · ")[0].strip()
        elif line.startswith("┃"):
            parts = [p.strip() for p in line.strip("┃").split("┃")]
            columns = parts if not columns else [a + b for a, b in zip(columns, parts, strict=True)]
        elif line.startswith("│"):
            parts = [p.strip() for p in line.strip("│").split("│")]
            if parts[0] and (not rows or any(parts[1:])):
                rows.append(parts)
            else:  # a model name wrapped onto the next line
                rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], parts, strict=True)]
        elif line.startswith("└"):
            first_task = 2 if columns[1] == "source" else 1
            for row in rows:
                for task, cell in zip(columns[first_task:], row[first_task:], strict=True):
                    if cell:
                        found[(target, row[0], task)] = cell
            columns, rows = [], []
    return found


def _markdown_cells(text: str) -> dict[tuple[str, str, str], str]:
    found: dict[tuple[str, str, str], str] = {}
    target, tasks = "", []
    for line in text.splitlines():
        if line.startswith("## ") and line[3:] in ("hopper", "blackwell"):
            target, tasks = line[3:], []
        elif target and line.startswith("| model | source |"):
            tasks = [c.strip() for c in line.strip("|").split("|")][2:]
        elif target and tasks and line.startswith("| ") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            found.update({(target, cells[0], t): c for t, c in zip(tasks, cells[2:], strict=True) if c})
        elif line.startswith("## "):
            target = ""
    return found


def _html_cells(page: str) -> dict[tuple[str, str, str], str]:
    found: dict[tuple[str, str, str], str] = {}
    for section in page.split('<section data-target="')[1:]:
        target = section[: section.index('"')]
        for row in section.split('<tr data-model="')[1:]:
            model = row[: row.index('"')]
            for task, body in re.findall(r'<td class="cell" data-task="([^"]+)"[^>]*>(.*?)</td>', row):
                found[(target, model, task)] = " / ".join(re.findall(r'<span class="r">(.*?)</span>', body))
    return found


def test_every_report_shows_the_same_numbers(tmp_path: Path) -> None:
    import_ptxbench(write_ptxbench_fixture(tmp_path / "per_turn.csv"), tmp_path / "paper")
    store_records(tmp_path / "mine", gpu_sweep_records(model=f"scripted:{tmp_path}/ladder.json"))
    md, page, data = tmp_path / "r.md", tmp_path / "r.html", tmp_path / "r.json"
    done = subprocess.run(
        [PTXWB, "bench", "report", tmp_path / "mine", tmp_path / "paper", "--md", md, "--html", page, "--json", data],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # The sweep has 4 turns, the paper's runs 8: T is 4 for all, and the report says why.
    assert "T = 1, 4;" in done.stdout and "the runs differ in turn budget" in done.stdout
    report = json.loads(data.read_text())
    assert report["turn_limits"] == [1, 4]
    expected = {}
    for cell in report["pivot"]:
        first, last = cell["first"], cell["last"]
        numbers = [
            percent(first["correct"] / first["n_trajectories"]),
            percent(last["correct"] / last["n_trajectories"]),
            percent(last["sass_verified"] / last["n_trajectories"]),
            speedup(last["best_speedup"]),
        ]
        assert list(cell["texts"].values()) == numbers  # the shown strings are the metrics' numbers
        label = (
            cell["model"]
            if cell["variant"] in ("default", "paper")
            else f"{cell['model']} · {cell['variant']}"
        )
        expected[(cell["target"], label, cell["task"])] = " / ".join(numbers)
    assert len(expected) == 2 * 3 * 7 + 1
    assert _terminal_cells(done.stdout) == expected
    assert _markdown_cells(md.read_text()) == expected
    assert _html_cells(page.read_text()) == expected
    for text in (done.stdout.split("\nwrote ")[0], md.read_text(), page.read_text(), data.read_text()):
        assert str(tmp_path) not in text and "/home/someone" not in text  # no host path anywhere
        assert "…" not in text  # no number cut short


@pytest.mark.nvcc
def test_a_static_sweep_report_says_not_measured(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from bench_support import run_scripted
    from build_support import session_cache

    folder, _ = run_scripted(tmp_path, session_cache(tmp_path_factory), trajectories=1)
    data = tmp_path / "r.json"
    done = subprocess.run([PTXWB, "bench", "report", folder.root, "--json", data], capture_output=True, text=True,
                          check=False, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "T = 1, 2;" in done.stdout  # the sweep's 2 turns, not 8
    tables = done.stdout.split("\nwrote ")[0]  # the last line names the file the person asked for
    assert NOT_MEASURED in tables and str(tmp_path) not in tables
    cells = {c["model"]: c for c in json.loads(data.read_text())["pivot"]}
    assert sorted(cells) == ["scripted:fails.json", "scripted:fixes.json"]
    for cell in cells.values():
        assert cell["last"]["correct"] is None and cell["last"]["sass_verified"] is None
        assert (
            cell["texts"]["correct@2"] == cell["texts"]["SASS@2"] == cell["texts"]["best×@2"] == NOT_MEASURED
        )
    # fixes' turn 1 built and was never run: not measured. fails' turn 1 did not build: not correct, 0 %.
    assert cells["scripted:fixes.json"]["texts"]["correct@1"] == NOT_MEASURED
    assert cells["scripted:fails.json"]["texts"]["correct@1"] == "0%"
    # What the static tier did measure: fixes passed it at turn 2, fails never did.
    assert cells["scripted:fixes.json"]["texts"]["static@2"] == "100%"
    assert cells["scripted:fails.json"]["texts"]["static@2"] == "0%"


def test_intervals_on_demand_are_the_same_counts(tmp_path: Path) -> None:
    import_ptxbench(write_ptxbench_fixture(tmp_path / "per_turn.csv"), tmp_path / "paper")
    md, data = tmp_path / "r.md", tmp_path / "r.json"
    done = subprocess.run(
        [PTXWB, "bench", "report", tmp_path / "paper", "--intervals", "--md", md, "--json", data, "--turns", "2,8"],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(data.read_text())
    assert report["turn_limits"] == [2, 8]
    terminal, markdown = _terminal_cells(done.stdout), _markdown_cells(md.read_text())
    assert len(terminal) == len(markdown) == len(report["pivot"])
    for cell in report["pivot"]:
        first, last = cell["first"], cell["last"]
        n = last["n_trajectories"]
        line = " / ".join([
            count_text(first["correct"], n, tuple(first["correct_ci"])),
            count_text(last["correct"], n, tuple(last["correct_ci"])),
            count_text(last["sass_verified"], n, tuple(last["sass_verified_ci"])),
            speedup(last["best_speedup"]),
        ])  # fmt: skip
        assert re.fullmatch(r"(\d+/\d+ \d+% \[\d+–\d+\] / ){3}(\d\.\d{3}×|–)", line)
        key = (cell["target"], cell["label"], cell["task"])
        assert terminal[key] == markdown[key] == line
