"""`ptxwb bench rejudge`: a sweep's recorded candidates judged again, and the verdicts that changed.

Each distinct candidate (source, task, target, workload) is evaluated once, through the same
evaluation pool a sweep uses. Every new verdict is written to `DIR/rejudge/<time>_<executor>.jsonl`
(one line per recorded turn: where it was, the old and the new verdict); the sessions are not touched.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from workbench.bench.folder import SweepFolder
from workbench.bench.pools import EvaluationPool
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import EvalResult
from workbench.session.events import Candidate, Evaluation
from workbench.session.hostpaths import Scrubber, portable_result
from workbench.session.log import create_new, read_session
from workbench.tasks import get_target

REJUDGE = "rejudge"


@dataclass(frozen=True)
class Recorded:
    session: str
    turn: int
    request: EvalRequest
    old: EvalResult


@dataclass(frozen=True)
class Verdict:
    recorded: Recorded
    new: EvalResult

    def summary(self, result: EvalResult) -> dict[str, object]:
        return {
            "status": str(result.status.value),
            "correct": result.correct,
            "sass_verified": result.sass_verified,
            "static_passed": result.static_passed,
            "speedup": result.speedup,
        }

    @property
    def changed(self) -> bool:
        old, new = self.summary(self.recorded.old), self.summary(self.new)
        # A speedup is a measurement: it changes a little every run. Only its presence is a verdict.
        old["speedup"], new["speedup"] = old["speedup"] is not None, new["speedup"] is not None
        return old != new


def recorded_candidates(folder: SweepFolder) -> list[Recorded]:
    """Every evaluated candidate of the sweep's finished sessions, in plan order."""
    found: list[Recorded] = []
    for item in folder.planned():
        path = folder.root / item.relpath
        if not path.is_file():
            continue
        read = read_session(path)
        workload = read.start.settings.get("workload")
        sources = {e.turn: e.source for e in read.events if isinstance(e, Candidate)}
        for event in read.events:
            if isinstance(event, Evaluation) and event.turn is not None and event.turn in sources:
                request = EvalRequest(
                    task=read.start.task,
                    target=get_target(read.start.target).name,
                    source=sources[event.turn],
                    workload=workload if isinstance(workload, str) else None,
                )
                found.append(Recorded(item.relpath, event.turn, request, event.result))
    return found


async def _judge_all(recorded: list[Recorded], executor: str, cache_dir: Path | None) -> list[Verdict]:
    pool = EvaluationPool([executor], cache_dir)
    distinct: dict[tuple[str, str, str, str | None], asyncio.Future[EvalResult]] = {}
    try:
        for item in recorded:
            r = item.request
            key = (r.source, r.task, r.target, r.workload)
            if key not in distinct:
                distinct[key] = asyncio.ensure_future(pool.evaluate(r))
        results = dict(zip(distinct, await asyncio.gather(*distinct.values()), strict=True))
    finally:
        await pool.shutdown()
    return [
        Verdict(
            item,
            results[(item.request.source, item.request.task, item.request.target, item.request.workload)],
        )
        for item in recorded
    ]


def rejudge(folder: SweepFolder, executor: str, cache_dir: Path | None = None) -> tuple[list[Verdict], Path]:
    recorded = recorded_candidates(folder)
    verdicts = asyncio.run(_judge_all(recorded, executor, cache_dir))
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = folder.root / REJUDGE / f"{stamp}_{re.sub(r'[^A-Za-z0-9_.-]+', '-', executor)}.jsonl"
    scrubber = Scrubber()  # the new verdicts name their builds' files `cache:<key>/<file>`, no host path
    with create_new(out, "a re-judge file") as file:
        for verdict in verdicts:
            line = {
                "session": verdict.recorded.session,
                "turn": verdict.recorded.turn,
                "changed": verdict.changed,
                "old": verdict.summary(verdict.recorded.old),
                "new": verdict.summary(verdict.new),
                "result": portable_result(verdict.new, scrubber).model_dump(mode="json"),
            }
            file.write(json.dumps(line) + "\n")
    return verdicts, out
