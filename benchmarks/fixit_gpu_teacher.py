"""Fixit's repair teacher with fixes verified on the GPU tiers, on a Hopper host (H200).

    PTXWB_CACHE=/tmp/ptxwb-cache python3 benchmarks/fixit_gpu_teacher.py [--executor local]
        [--work DIR] [--machine "H200"]

The trajectory: the shipped causal-attention session cut after its first turn (`fork_session`), so
its failure (the kernel without the causal mask, incorrect_numerical on the H200) is never fixed in
it. The repair teacher is `scripted:` with two answers, the recorded model answers of the shipped
session: first the same unmasked kernel again, which the GPU tiers must reject (a fix that fails the
evaluator is not kept), then the masked kernel, which must pass every tier. Expected: one row,
origin teacher, verified gpu, repair_try 2, on the H200. Both files are written to --work (kept).
The build and static tiers alone cannot tell the two kernels apart, which is why this runs on a GPU.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import subprocess
import tempfile
from pathlib import Path

from workbench.fixit.export import ExportOptions, TeacherOptions, export
from workbench.paths import sessions_dir
from workbench.session.events import Message
from workbench.session.log import fork_session, read_session

SESSION = "mha_with_lse_d128_causal_fix_h200.jsonl"


def prepare(work: Path) -> tuple[Path, Path]:
    """The unfixed trajectory and the scripted teacher's answers."""
    source = sessions_dir() / SESSION
    unfixed = fork_session(source, 1, work / "causal_turn1_unfixed.jsonl", "fixit-gpu-unfixed")
    answers = [
        e.content for e in read_session(source).events if isinstance(e, Message) and e.role == "assistant"
    ]
    teacher = work / "teacher_causal.json"
    teacher.write_text(json.dumps(answers), encoding="utf-8")  # turn 1's answer (unmasked), then turn 2's
    return unfixed, teacher


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executor", default="local")
    parser.add_argument("--work", type=Path, default=None, help="where the inputs and the dataset go")
    parser.add_argument("--machine", default="this machine")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="fixit_gpu_"))
    work.mkdir(parents=True, exist_ok=True)
    # A copy of the checkout on a GPU host may carry a stale .git: the caller can name the commit.
    sha = (
        os.environ.get("PTXWB_GIT_SHA")
        or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    )
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"# benchmarks/fixit_gpu_teacher.py on {args.machine}, {stamp}, git {sha or '?'}")
    unfixed, teacher = prepare(work)
    out = work / "repairs.jsonl"
    print(f"# the same as: ptxwb fixit export {unfixed} --teacher-repair scripted:{teacher} "
          f"--teacher-tries 3 --executor {args.executor} --out {out}")  # fmt: skip
    options = ExportOptions(
        teachers=TeacherOptions(repair=f"scripted:{teacher}", tries=3, executor=args.executor)
    )
    report = asyncio.run(export([unfixed], out, options))
    print(json.dumps(report.repair.model_dump() if report.repair else None))
    rows = [json.loads(line)["metadata"] for line in out.read_text().splitlines()]
    for meta in rows:
        print(json.dumps({k: meta[k] for k in ("origin", "verified", "category", "teachers", "fixed")}))
    expected = (
        len(rows) == 1
        and rows[0]["origin"] == "teacher"
        and rows[0]["verified"] == "gpu"
        and rows[0]["fixed"]["status"] == "passed"
        and rows[0]["teachers"]["repair_try"] == 2
        and report.repair is not None
        and report.repair.calls == 2
    )
    print(
        "PASS: the unmasked kernel was rejected on the GPU tiers, the masked one kept" if expected else "FAIL"
    )
    raise SystemExit(0 if expected else 1)


if __name__ == "__main__":
    main()
