"""Fixit export speed: a 100-trajectory sweep folder to a chat-messages dataset, without teachers.

    python benchmarks/fixit_export.py [--trajectories 100] [--repeats 3]
        [--machine "CPU dev box, 2 cores, no GPU"]

The sweep is SYNTHETIC, made from the real content of the two shipped H200 sessions: trajectory i is
one of them cut after turn k (`fork_session`, so k=1 leaves a failure never fixed), with the line
`// synthetic trajectory i` appended to every kernel (hashes updated, so no two trajectories share
a source and dedup keeps every pair); the verdicts are the recorded ones. The folder is laid out as a
sweep (model/task/ folders) with a non-session JSON-lines store beside the sessions, which the
export must skip. Timed: `export()` in this process (median of --repeats) and `ptxwb fixit export`
as a child process (Python start-up included). Goal: under 10 s.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workbench.fixit.export import ExportOptions, export
from workbench.fixit.pairs import MineOptions
from workbench.paths import sessions_dir
from workbench.session.log import fork_session

GOAL_S = 10.0
PTXWB = Path(sys.executable).parent / "ptxwb"
# (shipped session, turns kept): the GEMM ladder whole, fixed at turn 2, or its failure alone; the
# causal attention session whole, or its failure alone.
SHAPES = [
    ("gemm_n7168_k5120_ladder_h200.jsonl", 4),
    ("mha_with_lse_d128_causal_fix_h200.jsonl", 2),
    ("gemm_n7168_k5120_ladder_h200.jsonl", 2),
    ("mha_with_lse_d128_causal_fix_h200.jsonl", 1),
    ("gemm_n7168_k5120_ladder_h200.jsonl", 1),
]


def _mark_sources(path: Path, index: int) -> None:
    """Append a comment naming the trajectory to every kernel, with the hashes that follow from it."""
    lines = []
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "candidate":
            event["source"] += f"// synthetic trajectory {index}\n"
            event["sha256"] = hashlib.sha256(event["source"].encode()).hexdigest()
            sha = event["sha256"]
        elif event["type"] == "evaluation":
            event["result"]["source_sha256"] = sha
        lines.append(json.dumps(event))
    path.write_text("\n".join(lines) + "\n")


def make_sweep(folder: Path, trajectories: int) -> int:
    """The synthetic sweep; returns its size in bytes."""
    for index in range(trajectories):
        name, keep = SHAPES[index % len(SHAPES)]
        task = name.split("_h200")[0].removesuffix("_ladder").removesuffix("_fix")
        path = folder / "scripted" / task / f"traj_{index:03d}.jsonl"
        fork_session(sessions_dir() / name, keep, path, f"synthetic-{index:03d}")
        _mark_sources(path, index)
    (folder / "store.jsonl").write_text('{"sweep": "synthetic", "rows": 0}\n')  # the sweep's own store
    return sum(p.stat().st_size for p in folder.rglob("*.jsonl"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trajectories", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--machine", default="this machine")
    args = parser.parse_args()
    sha = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"# benchmarks/fixit_export.py on {args.machine}, {stamp}, git {sha or '?'}")
    print(f"# sweep: SYNTHETIC, {args.trajectories} trajectories from the shipped sessions' real turns")
    with tempfile.TemporaryDirectory() as tmp:
        sweep = Path(tmp) / "sweep"
        size = make_sweep(sweep, args.trajectories)
        print(f"sweep folder: {args.trajectories} session files + 1 store file, {size / 1e6:.1f} MB")
        options = ExportOptions(mine=MineOptions(improvements=True))
        times = []
        for run in range(args.repeats):
            started = time.perf_counter()
            report = asyncio.run(export([sweep], Path(tmp) / f"lib{run}.jsonl", options))
            times.append(time.perf_counter() - started)
        out = Path(tmp) / f"lib{args.repeats - 1}.jsonl"
        print(
            f"pairs found {report.pairs_found}, duplicates {report.duplicates}, unfixed failures "
            f"{report.unfixed}, rows {report.rows['train']}, output {out.stat().st_size / 1e6:.1f} MB"
        )
        print(
            f"export() in-process   median {statistics.median(times):.2f} s  "
            f"min {min(times):.2f}  max {max(times):.2f}  ({args.repeats} runs)"
        )
        command = [
            str(PTXWB),
            "fixit",
            "export",
            str(sweep),
            "--improvements",
            "--out",
            str(Path(tmp) / "cli.jsonl"),
        ]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        cli = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"ptxwb fixit export failed ({done.returncode}): {done.stderr.strip()}")
        print(f"ptxwb fixit export    {cli:.2f} s  (one run, a child process, Python start-up included)")
        worst = max(cli, *times)
        print(
            f"goal: < {GOAL_S:.0f} s for the sweep: {'met' if worst < GOAL_S else 'NOT MET'} (slowest {worst:.2f} s)"
        )


if __name__ == "__main__":
    main()
