"""PTXBench's per-turn CSV as runs of the store, its trajectories as sessions, and the reports over them."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from workbench.bench.folder import SweepFolder, read_folders
from workbench.bench.html_report import render_html
from workbench.bench.metrics import compute
from workbench.bench.ptxbench import import_ptxbench, read_per_turn
from workbench.bench.report import cells_csv, cells_json, markdown, paper_rows, terminal_table
from workbench.errors import UserError
from workbench.session.events import Message, SessionEnd
from workbench.session.log import read_session

HEADER = ["model", "arch", "required_arch_tag", "definition", "exp_dir", "trajectory_id", "turn",
          "reasoning_tokens", "correctness", "speedup", "arch_tag", "correct_with_arch"]  # fmt: skip
ROWS = [
    # run-one (hopper): exp_000 fails to build, then is correct with the family proven at 0.8×;
    # exp_001 is correct at once without it (0.3×), then numerically wrong.
    ["Model A", "hopper", "H", "gemm_n7168_k5120", "/home/u/runs/run-one", "exp_000", "0", "10", "Compilation error", "0.0", "", "0"],
    ["Model A", "hopper", "H", "gemm_n7168_k5120", "/home/u/runs/run-one", "exp_000", "1", "10", "Correct", "0.8", "H", "1"],
    ["Model A", "hopper", "H", "gemm_n7168_k5120", "/home/u/runs/run-one", "exp_001", "0", "10", "Correct", "0.3", "A", "0"],
    ["Model A", "hopper", "H", "gemm_n7168_k5120", "/home/u/runs/run-one", "exp_001", "1", "10", "Numerical error", "0.0", "", "0"],
    # run-two (blackwell): never correct.
    ["Model B", "blackwell", "B", "mha_with_lse_d128", "/x/run-two/", "exp_000", "0", "5", "Extraction error", "0.0", "", "0"],
    ["Model B", "blackwell", "B", "mha_with_lse_d128", "/x/run-two/", "exp_000", "1", "5", "Runtime error", "0.0", "", "0"],
]  # fmt: skip


def write_csv(path: Path, header: list[str] = HEADER, rows: list[list[str]] = ROWS) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def trajectory_json(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    messages = [
        {"role": "system", "content": "You write kernels."},
        {"role": "user", "content": "Task: gemm_n7168_k5120"},
        {"role": "assistant", "content": "```cuda\n// first try\n```", "extra": {"cost": 0.25}},
        {"role": "user", "content": "Failed to compile kernel"},
        {"role": "assistant", "content": "```cuda\n// second try\n```", "extra": {"cost": 0.5}},
        {"role": "user", "content": "PASSED"},
    ]
    info = {"config": {"model": {"model_name": "Model A"}}, "exit_status": "LimitsExceeded"}
    path.write_text(json.dumps({"info": info, "messages": messages, "trajectory_format": "mini-swe-agent-1"}))


def test_per_turn_rows_keep_the_paper_semantics(tmp_path: Path) -> None:
    records = read_per_turn(write_csv(tmp_path / "per_turn.csv"))
    assert [(r.key.run, r.key.target, r.key.trajectory) for r in records] == [
        ("run-one", "hopper", "exp_000"), ("run-one", "hopper", "exp_001"), ("run-two", "blackwell", "exp_000")
    ]  # fmt: skip
    first = records[0].rows
    assert [r.turn for r in first] == [1, 2]  # PTXBench's turn 0 is turn 1 here
    assert [r.status for r in first] == ["compile_error", "passed"]
    assert first[0].speedup is None and first[1].speedup == 0.8  # 0.0 of a failed turn is no speedup
    assert records[1].rows[0].status == "correct_without_arch" and not records[1].rows[0].sass_verified
    assert all(r.static_passed is None for rec in records for r in rec.rows)

    cells = {(c.run, c.turn_limit): c for c in compute(records, (1, 2))}
    one1, one2, two2 = cells[("run-one", 1)], cells[("run-one", 2)], cells[("run-two", 2)]
    assert (one1.n_trajectories, one1.correct, one1.sass_verified, one1.best_speedup) == (2, 1, 0, 0.3)
    assert (one2.correct, one2.sass_verified, one2.best_speedup) == (2, 1, 0.8)
    assert one2.static_passed is None
    assert one2.failure_mix == {"compile_error": 1, "correct_without_arch": 1, "incorrect_numerical": 1}
    assert (two2.correct, two2.best_speedup, two2.failure_mix) == (
        0,
        None,
        {"no_code": 1, "runtime_error": 1},
    )


@pytest.mark.parametrize(
    ("header", "rows", "message"),
    [
        ([c for c in HEADER if c != "correct_with_arch"], [], "no column correct_with_arch"),
        (HEADER, [ROWS[0][:1] + ["ampere"] + ROWS[0][2:]], r"per_turn.csv:2: unknown arch 'ampere'"),
        (HEADER, [ROWS[0][:6] + ["zero"] + ROWS[0][7:]], r"per_turn.csv:2: invalid literal"),
        (HEADER, [ROWS[0], ROWS[0]], r"per_turn.csv:3: turn 0 of exp_000 is listed twice"),
    ],
)
def test_bad_per_turn_data_is_one_line(
    tmp_path: Path, header: list[str], rows: list[list[str]], message: str
) -> None:
    path = write_csv(tmp_path / "per_turn.csv", header, rows)
    with pytest.raises(UserError, match=message) as caught:
        import_ptxbench(path, tmp_path / "out")
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "out").exists()  # nothing written for bad data


def test_import_with_sessions_and_rebuild(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    trajectory_json(runs / "run-one" / "trajectories" / "exp_000.json")
    out = tmp_path / "out"
    records, sessions = import_ptxbench(write_csv(tmp_path / "per_turn.csv"), out, runs)
    assert (len(records), sessions) == (3, 1)
    session = read_session(out / "imported" / "run-one" / "exp_000.jsonl")
    assert (session.start.task, session.start.target, session.start.model) == (
        "gemm_n7168_k5120",
        "hopper",
        "Model A",
    )
    answers = [e for e in session.events if isinstance(e, Message) and e.role == "assistant"]
    assert [a.cost_usd for a in answers] == [0.25, 0.5] and isinstance(session.events[-1], SessionEnd)

    folder = SweepFolder(out)
    with folder.open_store() as store:
        before = store.dump_turns()
    linked = {r["session_path"] for r in before if r["trajectory"] == "exp_000" and r["run"] == "run-one"}
    assert linked == {"imported/run-one/exp_000.jsonl"}
    # Importing again replaces the runs; it does not add them twice.
    import_ptxbench(tmp_path / "per_turn.csv", out, runs)
    folder.rebuild()  # from the CSV kept in imports/ and the sessions
    with folder.open_store() as store:
        assert store.dump_turns() == before
    assert len(before) == 6


def test_reports_over_imported_runs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    import_ptxbench(write_csv(tmp_path / "per_turn.csv"), out)
    records = read_folders([out])
    cells = compute(records, (1, 2))
    rows = paper_rows(cells, 1, 2)
    md = markdown(rows, 1, 2)
    # run-one: 1 of 2 correct at T=1 (Wilson 9–91 %), 2 of 2 at T=2, 1 of 2 verified, best 0.8×.
    line = next(line for line in md.splitlines() if line.startswith("| run-one"))
    assert "| 1/2 50% [9–91] | 2/2 100% [34–100] | 1/2 50% [9–91] | 0.800× | not measured |" in line
    assert "incorrect_numerical 1" in md and "no kernel in the answer 1" in md

    page = render_html(records, rows, 1, 2, "paper <rows>")
    # correct@T curves for each of the two targets, the speedups, the failure mix; one page, nothing fetched.
    assert page.count("<svg") == 4 and "paper &lt;rows&gt;" in page
    assert not re.search(r'(src|href)="(?!#)', page) and "<link" not in page and page.count("<script>") == 1
    assert "run-one" in page and "0.800×" in page and "/home/u" not in page

    table = cells_csv(cells).splitlines()
    columns = table[0].split(",")
    assert {"correct_ci_low", "correct_ci_high", "fast_0.5", "pass@1", "failure_mix"} <= set(columns)
    assert len(table) == 1 + 4
    data = json.loads(cells_json(cells))["cells"]
    required = {"run", "model", "target", "task", "turn_limit", "n_trajectories", "correct", "sass_verified",
                "static_passed", "best_speedup"}  # fmt: skip
    assert all(required <= set(cell) for cell in data) and len(data) == 4

    console = Console(record=True, width=200)
    console.print(terminal_table(rows, 1, 2))
    text = console.export_text()
    assert "run-one" in text and "correct@2" in text and "0.800×" in text
