"""Where a verdict's seconds go, with and without the per-user worker service, side by side in one run
(on the GPU host).

For the headline GEMM reference, each figure against the tiers' own time (correctness + timing +
dynamic, the floor nothing can go below):
1. one-shot `ptxwb eval --executor local` beyond its build (build cached): with its own worker
   (`--no-worker-service`, the path before the service) and through a warm service;
2. back to back in one process (an agent's loop, a script holding the executor): own worker and service;
3. author save-to-verdict: the author screen's driver, headless, the file saved with a changed comment
   (so each save is built afresh), through the service;
4. a sweep's evaluations per GPU-hour with cold builds: `--sweep N` distinct sources through one
   evaluation pool (builds on the CPU cores while the GPU judges), through the service; over the whole
   wall time, and from the first verdict to the last (without the wait for the first cold build, which
   a sweep pays once however long it is). `--build-slots N [N ...]` runs one sweep per count of builds
   at once, side by side (all cores by default): how the CPU shared between builds and the worker's
   own processes moves the first verdict and the rate.
Each figure's speedup against cuBLAS is recorded too, so a move in an honest speedup shows. Last, ncu's
seconds after the go in evaluations whose ncu run was warmed (its first profiled range run before the
candidate came) against those whose was not (each row says which; a one-shot's own fresh worker is
expected to have had no time to warm): the warm range's saving.

`python benchmarks/latency.py OUT.json [--rounds R] [--sweep N] [--build-slots N ...] [--only PART ...]
[--service-only]` (PART:
one_shot, back_to_back, sweep, author; all by default; `--service-only` leaves out the own-worker figures).
Figure 3 watches the file with watchfiles, which a bare GPU host lacks: add its wheels to the worker's
(`device-wheels watchfiles==1.3.0 anyio==4.16.0 idna==3.20 sniffio==1.3.1`, the core lock's versions).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.provenance import revision

ROOT = Path(__file__).resolve().parent.parent
TASK = "gemm_n7168_k5120"
REFERENCE = ROOT / "references" / "gemm" / "04_ws_persistent.cu"
TIERS = ("correctness", "timing", "dynamic")


def measured(stages: dict[str, Any], phases: dict[str, float] | None, wall_s: float) -> dict[str, Any]:
    """One evaluation: its wall time, the build's part, the tiers' own time and what was left."""
    seconds = {name: float((stages.get(name) or {}).get("duration_s") or 0.0) for name in stages}
    build = seconds.get("build", 0.0) + seconds.get("static", 0.0)
    tiers = sum(seconds.get(name, 0.0) for name in TIERS)
    return {
        "status": {name: (stages.get(name) or {}).get("status") for name in ("build", *TIERS)},
        "speedup": (stages.get("timing") or {}).get("speedup"),
        "wall_s": round(wall_s, 3),
        "build_s": round(build, 3),
        "beyond_build_s": round(wall_s - build, 3),
        "tiers_s": round(tiers, 3),
        # Each tier on its own: which one moved when the tiers' total does.
        "stages_s": {name: round(seconds.get(name, 0.0), 3) for name in TIERS},
        # The correctness stage's wait for memcheck, and whether memcheck's process had its context.
        "memcheck": {
            key: (stages.get("correctness") or {}).get(key) for key in ("memcheck_wait_s", "memcheck_ready")
        },
        "timing_parts_s": (stages.get("timing") or {}).get("parts_s"),
        "profiler_prepared": (stages.get("dynamic") or {}).get("profiler_prepared"),
        "profiler_warmed": (stages.get("dynamic") or {}).get("profiler_warmed"),
        "profiler_first_range_s": (stages.get("dynamic") or {}).get("profiler_first_range_s"),
        # ncu's own time from the go signal to its exit: the rest of the dynamic tier is the worker's.
        "ncu_after_go_s": (stages.get("dynamic") or {}).get("ncu_s"),
        "profiler_go_ahead_s": (stages.get("dynamic") or {}).get("profiler_go_ahead_s"),
        "phases_s": phases or {},
    }


def one_shot(env: dict[str, str], service: bool) -> dict[str, Any]:
    command = [sys.executable, "-c", "from workbench.cli.main import main; main()", "eval", str(REFERENCE),
               "--task", TASK, "--executor", "local", "--json"]  # fmt: skip
    if not service:
        command.append("--no-worker-service")
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=600)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"ptxwb eval failed: {done.stderr.strip()[-400:]}")
    result = json.loads(done.stdout)
    stages = {name: stage for name, stage in result["stages"].items() if stage}
    return measured(stages, result.get("phases_s"), wall)


def stage_dicts(result: Any) -> dict[str, Any]:
    return {name: stage.model_dump(mode="json") for name, stage in result.stages.in_order()}


async def back_to_back(rounds: int, service: bool, cache: Path) -> list[dict[str, Any]]:
    from workbench.evaluate.local_executor import LocalExecutor
    from workbench.evaluate.request import EvalRequest

    executor = LocalExecutor(cache, worker_service=service)
    rows = []
    try:
        for _ in range(rounds + 1):  # the first one warms the worker (or the process's own worker)
            started = time.perf_counter()
            result = await executor.evaluate(
                EvalRequest(task=TASK, target="hopper", source=REFERENCE.read_text())
            )
            rows.append(measured(stage_dicts(result), result.phases_s, time.perf_counter() - started))
    finally:
        await executor.close()
    return rows[1:]


class QuietSink:
    """The author driver's screen, reduced to noticing verdicts."""

    def __init__(self) -> None:
        self.verdicts: asyncio.Queue[Any] = asyncio.Queue()

    @property
    def app(self) -> Any:
        raise RuntimeError("no screen in a benchmark")

    async def ingest(self, item: Any) -> None:
        from workbench.session.events import Evaluation

        if isinstance(item, Evaluation):
            self.verdicts.put_nowait((time.perf_counter(), item.result))

    async def rebuild(self, events: list[Any]) -> None:
        return None

    def state_changed(self) -> None:
        return None


async def author_saves(rounds: int, folder: Path) -> list[dict[str, Any]]:
    from workbench.evaluate.executors import make_executor
    from workbench.tui.drivers.author import AuthorDriver

    kernel = folder / "kernel.cu"
    source = REFERENCE.read_text()
    kernel.write_text(source)
    driver = AuthorDriver(
        task=TASK, target="hopper", kernel=kernel, executor=make_executor("local"), out=None
    )
    sink = QuietSink()
    running = asyncio.create_task(driver.run(sink))  # type: ignore[arg-type]
    rows = []
    try:
        await sink.verdicts.get()  # the first verdict, on opening
        for save in range(rounds):
            await asyncio.sleep(1.0)  # a person between saves; the watcher's debounce is 0.3 s of it
            saved = time.perf_counter()
            kernel.write_text(f"// save {save} at {time.time_ns()}\n{source}")
            at, result = await sink.verdicts.get()
            rows.append(measured(stage_dicts(result), result.phases_s, at - saved))
    finally:
        await driver.close()
        running.cancel()
        await driver.executor.close()
    return rows


async def sweep(count: int, cache: Path, slots: int | None) -> dict[str, Any]:
    from workbench.bench.pools import EvaluationPool
    from workbench.evaluate.request import EvalRequest

    pool = EvaluationPool(["local"], cache, cpus=slots)
    source = REFERENCE.read_text()
    try:
        await pool.evaluate(EvalRequest(task=TASK, target="hopper", source=source))  # warm, not counted

        async def one(index: int) -> dict[str, Any]:
            unique = f"// sweep candidate {index} {time.time_ns()}\n{source}"  # a build of its own
            started = time.perf_counter()
            result = await pool.evaluate(EvalRequest(task=TASK, target="hopper", source=unique))
            return measured(stage_dicts(result), result.phases_s, time.perf_counter() - started)

        started = time.perf_counter()
        rows = await asyncio.gather(*(one(index) for index in range(count)))
        wall = time.perf_counter() - started
    finally:
        await pool.shutdown()
    tiers = sum(row["tiers_s"] for row in rows)
    # Every evaluation started with the sweep, so its wall time is when its verdict came. Before the first
    # one the GPU waits for a cold build with nothing to judge: the pipeline's fill, paid once a sweep.
    verdicts = sorted(row["wall_s"] for row in rows)
    steady = (count - 1) * 3600 / (verdicts[-1] - verdicts[0]) if count > 1 else None
    return {
        "evaluations": count,
        "build_slots": pool.cpus,
        "wall_s": round(wall, 3),
        "per_gpu_hour": round(count * 3600 / wall, 1),
        "first_verdict_s": round(verdicts[0], 3),
        "steady_per_gpu_hour": round(steady, 1) if steady else None,
        "floor_per_gpu_hour": round(count * 3600 / tiers, 1),
        "rows": rows,
    }


def median_parts(rows: list[dict[str, Any]], kinds: tuple[str, ...]) -> dict[str, float]:
    """The median over the rows of each timing-stage part whose name starts with one of `kinds`."""
    parts = [row.get("timing_parts_s") or {} for row in rows]
    names = sorted({name for seen in parts for name in seen if name.startswith(kinds)})
    return {name: round(statistics.median(seen[name] for seen in parts if name in seen), 4) for name in names}


def checks_by_part(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The median over the rows of the timing stage's integrity work inside its timed rounds: the checks
    of every timed call's outputs and each of their parts (the judge's), the counters' opening, their
    requests around each counted call (by the judge's parts too) and their close after the rounds, each
    entrant's summed waits between its flush and its call (`gap.*`), and the stage's wait for an ncu warm
    range still in flight."""
    return median_parts(rows, ("checks", "counters", "gap.", "profiler_warm"))


def rounds_by_part(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The median over the rows of the rest of the timing stage: its timed rounds whole, each entrant's
    prepares and calls, the runner's own parts of a prepare and of the trace's collection."""
    return median_parts(rows, ("timed_rounds", "prepare", "call.", "collect", "statistics"))


def summary(label: str, rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    values = [row[key] for row in rows]
    tiers = [row["tiers_s"] for row in rows]
    median, floor = statistics.median(values), statistics.median(tiers)
    line = {
        "figure": label,
        "median_s": round(median, 3),
        "tiers_s": round(floor, 3),
        "over_tiers": round(median / floor, 2) if floor else None,
        "speedups": [row["speedup"] for row in rows],
        "queue_s": [row["phases_s"].get("queue") for row in rows],
        "timing_checks_s": checks_by_part(rows),
        "timing_rounds_s": rounds_by_part(rows),
        # How far ahead of the dynamic stage the timing stage gave ncu's go, by row.
        "profiler_go_ahead_s": [row.get("profiler_go_ahead_s") for row in rows],
    }
    print(json.dumps(line), flush=True)
    return line


def profiler_warm_saving(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """ncu's time after the go, evaluations whose ncu run had its first range before the candidate came
    against those whose had not (by each row's own `profiler_warmed`), in this run: the warm range's
    saving measured side by side, whatever GPU this is."""
    rows = [row for part in runs.values() for row in part if row.get("ncu_after_go_s") is not None]
    line: dict[str, Any] = {"figure": "ncu after the go, warmed against not"}
    for name, warmed in (("warmed", True), ("not_warmed", False)):
        seconds = [row["ncu_after_go_s"] for row in rows if bool(row.get("profiler_warmed")) is warmed]
        line[name] = {
            "evaluations": len(seconds),
            "median_s": round(statistics.median(seconds), 3) if seconds else None,
        }
    if line["warmed"]["median_s"] is not None and line["not_warmed"]["median_s"] is not None:
        line["saving_s"] = round(line["not_warmed"]["median_s"] - line["warmed"]["median_s"], 3)
    return line


PARTS = ["one_shot", "back_to_back", "sweep", "author"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sweep", type=int, default=12)
    parser.add_argument(
        "--build-slots", type=int, nargs="+", default=[None], help="builds at once, per sweep"
    )
    parser.add_argument("--only", nargs="+", choices=PARTS, default=PARTS, help="the figures to measure")
    parser.add_argument(
        "--service-only",
        action="store_true",
        help="leave out the own-worker figures (each call starts a worker: 11-15 s on H100s)",
    )
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="ptxwb-latency-"))
    runtime = scratch / "runtime"
    runtime.mkdir(mode=0o700)
    cache = scratch / "cache"
    # A service of this run's own, and a build cache warmed by the first evaluation.
    os.environ.update(XDG_RUNTIME_DIR=str(runtime), PTXWB_CACHE=str(cache))
    env = dict(os.environ)
    report: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "git_sha": revision(),
        "task": TASK,
        "reference": str(REFERENCE.relative_to(ROOT)),
    }
    report["figures"], report["runs"] = [], {}

    def record(name: str, rows: list[dict[str, Any]], *figures: tuple[str, str]) -> None:
        """Keep a part's rows and figures, written at once: a later part that fails loses nothing."""
        report["runs"][name] = rows
        report["figures"] += [summary(label, rows, key) for label, key in figures]
        report["profiler_warm"] = profiler_warm_saving(report["runs"])
        args.out.write_text(json.dumps(report, indent=2) + "\n")

    try:
        if "one_shot" in args.only:
            if not args.service_only:
                own = [one_shot(env, service=False) for _ in range(args.rounds + 1)][1:]  # the first builds
                record("one_shot_own", own, ("one-shot eval beyond build, own worker", "beyond_build_s"))
            one_shot(env, service=True)  # starts the service and warms it (and builds, where none did)
            warm = [one_shot(env, service=True) for _ in range(args.rounds)]
            record("one_shot_service", warm, ("one-shot eval beyond build, warm service", "beyond_build_s"))
        if "back_to_back" in args.only:
            if not args.service_only:
                own_b2b = asyncio.run(back_to_back(args.rounds, False, cache))
                record(
                    "back_to_back_own", own_b2b, ("back to back beyond build, own worker", "beyond_build_s")
                )
            warm_b2b = asyncio.run(back_to_back(args.rounds, True, cache))
            record(
                "back_to_back_service",
                warm_b2b,
                ("back to back beyond build, warm service", "beyond_build_s"),
            )
        if "sweep" in args.only:
            for slots in args.build_slots:
                sweep_figure(args.sweep, cache, slots, report, record)
        if "author" in args.only:
            author = asyncio.run(author_saves(args.rounds, scratch))
            record(
                "author",
                author,
                ("author save-to-verdict (cold build), service", "wall_s"),
                ("author save-to-verdict beyond build, service", "beyond_build_s"),
            )
    finally:
        print(json.dumps(profiler_warm_saving(report["runs"])), flush=True)
        subprocess.run([sys.executable, "-c", "from workbench.cli.main import main; main()", "worker", "stop"],
                       env=env, check=False, capture_output=True)  # fmt: skip


def sweep_figure(
    count: int, cache: Path, slots: int | None, report: dict[str, Any], record: Callable[..., None]
) -> None:
    """The sweep's figure: evaluations per GPU-hour over the wall, from the first verdict on, and the floor;
    every later sweep is kept beside the first (`sweep_<slots>`, then `sweep_<slots>_2` for the same count
    again)."""
    swept = asyncio.run(sweep(count, cache, slots))
    keys = (
        "evaluations",
        "build_slots",
        "wall_s",
        "per_gpu_hour",
        "first_verdict_s",
        "steady_per_gpu_hour",
        "floor_per_gpu_hour",
    )
    line = {k: swept[k] for k in keys}
    print(json.dumps({"figure": "sweep, cold builds, service", **line}), flush=True)
    name = "sweep"
    if name in report:
        base = name = f"sweep_{swept['build_slots']}"
        again = 1
        while name in report:
            again += 1
            name = f"{base}_{again}"
    report[name] = line
    record(name, swept["rows"])


if __name__ == "__main__":
    main()
