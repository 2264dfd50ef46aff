"""Report rendering over 100+ runs, and the paper's published cells reproduced from its per-turn data.

    python benchmarks/bench_report.py [--ptxbench-data DIR] [--machine TEXT]

DIR is PTXBench's `benchmark/plot_viewer_v1/data/` (a checkout of zhang677/PTXBench): its per-turn CSV
(`reasoning_tokens_vs_performance.csv`, 105 runs) is imported, every report is rendered from the
store, and the cells are compared with the published `correctness_rate_by_release_date.csv`,
`best_speedup_by_release_date.csv` and `arch_instruction_correctness_by_release_date.csv`. Without
DIR a synthetic store of 100 runs × 12 trajectories × 8 turns (seeded) is reported instead.
"""

from __future__ import annotations

import argparse
import csv
import io
import random
import subprocess
import tempfile
import time
from pathlib import Path

from rich.console import Console

from workbench.bench.folder import read_folders
from workbench.bench.html_report import render_html
from workbench.bench.metrics import compute
from workbench.bench.ptxbench import import_ptxbench, run_name
from workbench.bench.records import TrajectoryRecord, TurnRow
from workbench.bench.report import cells_csv, cells_json, markdown, paper_rows, terminal_table
from workbench.bench.spec import TrajectoryKey
from workbench.bench.store import STORE_FILE, Store

ROOT = Path(__file__).resolve().parent.parent
PER_TURN = "reasoning_tokens_vs_performance.csv"


def synthetic(root: Path, runs: int = 100) -> None:
    rng = random.Random(2026)
    records = []
    for run in range(runs):
        for trajectory in range(12):
            rows = []
            for turn in range(1, 9):
                correct = rng.random() < 0.3
                rows.append(TurnRow(turn=turn, status="passed" if correct else rng.choice(["compile_error", "runtime_error"]),
                                    correct=correct, sass_verified=correct and rng.random() < 0.7, static_passed=True,
                                    speedup=rng.uniform(0.1, 1.2) if correct else None, prompt_tokens=1000,
                                    completion_tokens=500, cost_usd=0.01))  # fmt: skip
            key = TrajectoryKey(
                f"run{run:03d}",
                f"model-{run % 7}",
                "hopper",
                "gemm_n7168_k5120",
                "default",
                f"t{trajectory:03d}",
            )
            records.append(TrajectoryRecord(key, True, "turn_limit", rows))
    with Store(root / STORE_FILE) as store:
        store.put(records)


def render_all(root: Path) -> dict[str, float]:
    """Every report from the store, timed: read, metrics at T = 1, 8, terminal, Markdown, HTML, CSV, JSON."""
    times: dict[str, float] = {}
    began = time.perf_counter()
    records = read_folders([root])
    times["read store"] = time.perf_counter() - began
    mark = time.perf_counter()
    cells = compute(records, (1, 8))
    times["metrics (T=1,8)"] = time.perf_counter() - mark
    mark = time.perf_counter()
    rows = paper_rows(cells, 1, 8)
    Console(file=io.StringIO(), width=220).print(terminal_table(rows, 1, 8))
    markdown(rows, 1, 8)
    cells_csv(cells)
    cells_json(cells)
    times["terminal + Markdown + CSV + JSON"] = time.perf_counter() - mark
    mark = time.perf_counter()
    render_html(records, rows, 1, 8, "benchmark")
    times["HTML with 3 plots"] = time.perf_counter() - mark
    times["total"] = time.perf_counter() - began
    return times


def published(path: Path) -> dict[tuple[str, int], dict[str, str]]:
    with path.open(newline="") as handle:
        return {(run_name(r["exp_dir"]), int(r["turn_limit"])): r for r in csv.DictReader(handle)}


def reproduce(data: Path, root: Path) -> None:
    cells = {(c.run, c.turn_limit): c for c in compute(read_folders([root]), (1, 4, 8))}
    correct = published(data / "correctness_rate_by_release_date.csv")
    best = published(data / "best_speedup_by_release_date.csv")
    arch = published(data / "arch_instruction_correctness_by_release_date.csv")

    def same_best(ours: float | None, theirs: str) -> bool:
        return abs((ours or 0.0) - float(theirs or 0)) < 1e-6  # PTXBench writes 0 where no turn was correct

    checks = {
        "correct@T": [(k, cells[k].correct == int(r["correct"]) and cells[k].n_trajectories == int(r["n_trajectories"]))
                      for k, r in correct.items()],
        "best speedup@T": [(k, same_best(cells[k].best_speedup, r["best_speedup"])) for k, r in best.items()],
        "SASS-verified@T": [(k, cells[k].sass_verified == int(r["correct_with_arch"])) for k, r in arch.items()],
    }  # fmt: skip
    for name, results in checks.items():
        print(f"{name:16s} {sum(ok for _, ok in results)}/{len(results)} published cells reproduced exactly")
    for key, ok in checks["SASS-verified@T"]:
        if not ok:
            row = arch[key]
            print(f"  SASS differs: {key[0]} T={key[1]}: ours {cells[key].sass_verified} from the per-turn "
                  f"correct_with_arch, published {row['correct_with_arch']} from PTXBench's separate SASS export "
                  f"({row['n_correct_turns']} correct turns, {row['n_unknown_correct_turns']} of them inconclusive there)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ptxbench-data", type=Path)
    parser.add_argument("--machine", default="unnamed machine")
    args = parser.parse_args()
    sha = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], check=False, capture_output=True, text=True, cwd=ROOT
    )
    print(f"# bench_report: {time.strftime('%Y-%m-%d')}, git {sha.stdout.strip() or '?'}, {args.machine}")
    with tempfile.TemporaryDirectory(prefix="bench_report_") as tmp:
        root = Path(tmp) / "store"
        if args.ptxbench_data is not None:
            began = time.perf_counter()
            records, _ = import_ptxbench(args.ptxbench_data / PER_TURN, root)
            print(f"imported PTXBench per-turn data: {len({r.key.run for r in records})} runs, {len(records)} "
                  f"trajectories, {sum(len(r.rows) for r in records)} turns in {time.perf_counter() - began:.2f} s")  # fmt: skip
        else:
            root.mkdir()
            synthetic(root)
            print("synthetic store: 100 runs x 12 trajectories x 8 turns")
        for name, seconds in render_all(root).items():
            print(f"{name:34s} {seconds:.3f} s")
        if args.ptxbench_data is not None:
            reproduce(args.ptxbench_data, root)


if __name__ == "__main__":
    main()
