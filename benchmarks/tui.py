"""TUI benchmark: cold start, switching to a 20k-line SASS turn, streaming, a fast replay.

    .venv/bin/python benchmarks/tui.py [--runs 5]

Prints one line per figure, with the issue's goal beside it. The sessions it replays are synthetic
(made here, in a temporary folder, with invented verdicts): they measure the UI, nothing else. The
20k-line listing is real: nvcc + cuobjdump on a kernel with a long unrolled loop (compiled once,
kept in the temporary folder for the next run).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workbench.agent.items import TextDelta
from workbench.evaluate.gpu.toolchain import find_tool
from workbench.evaluate.result import (
    BuildStage,
    EvalResult,
    Stages,
    StaticStage,
    Status,
    TimingStage,
    TimingStats,
)
from workbench.session.events import Candidate, Evaluation, Event, Message, SessionEnd, SessionStart
from workbench.session.log import SessionWriter, read_session
from workbench.tui.app import WorkbenchApp
from workbench.tui.drivers.replay import ReplayDriver
from workbench.tui.screens.session import SessionScreen
from workbench.tui.widgets.code_pane import CodePane

WORK = Path(tempfile.gettempdir()) / "ptxwb-bench-tui"
SIZE = (160, 48)

UNROLLED = """
template <int N>
__global__ void unrolled(float* out, const float* in) {
  __shared__ float s[N + 1];
  for (int i = threadIdx.x; i <= N; i += blockDim.x) s[i] = in[i];
  __syncthreads();
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i % 8] = fmaf(s[i], acc[i % 8], s[i + 1]);
  float r = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) r += acc[j];
  out[threadIdx.x] = r;
}
template __global__ void unrolled<16000>(float*, const float*);
"""


def big_sass() -> Path:
    """A real SASS listing of about 40k cuobjdump lines (20k instructions), compiled once."""
    WORK.mkdir(exist_ok=True)
    sass = WORK / "unrolled.sass"
    if sass.is_file():
        return sass
    source, cubin = WORK / "unrolled.cu", WORK / "unrolled.cubin"
    source.write_text(UNROLLED)
    print("compiling the 20k-instruction kernel once (a minute or two)…", file=sys.stderr)
    subprocess.run(["nvcc", "-arch=sm_90a", "-cubin", "-o", str(cubin), str(source)], check=True)
    cuobjdump = find_tool("cuobjdump")
    if cuobjdump is None:
        raise SystemExit("cuobjdump not found")
    listing = subprocess.run(
        [str(cuobjdump), "--dump-sass", str(cubin)], check=True, capture_output=True, text=True
    )
    sass.write_text(listing.stdout)
    return sass


def synthetic_session(
    path: Path, turns: int, sass: dict[int, Path] | None = None, answer_words: int = 300
) -> Path:
    """A made-up session: model calls of 30 s, evaluations of 10 s; invented verdicts."""
    path.unlink(missing_ok=True)
    t = 1_760_000_000.0
    events: list[Event] = [
        Message(ts=t + 0.1, role="system", content="synthetic benchmark session", source="workbench"),
        Message(ts=t + 0.2, role="user", content="synthetic task", source="workbench"),
    ]
    words = " ".join(f"word{i}" for i in range(answer_words))
    for turn in range(1, turns + 1):
        source = f"// synthetic turn {turn}\n__global__ void k(float* x) {{ x[threadIdx.x] = {turn}; }}\n"
        t += 30
        events.append(
            Message(
                ts=t,
                turn=turn,
                role="assistant",
                content=f"{words}\n```cuda\n{source}```",
                source="model",
                latency_s=30,
            )
        )
        events.append(
            Candidate(
                ts=t + 0.1,
                turn=turn,
                source=source,
                origin="model",
                sha256=hashlib.sha256(source.encode()).hexdigest(),
            )
        )
        candidate = TimingStats(
            name="candidate",
            median_ms=1 / turn,
            p25_ms=0.99 / turn,
            p75_ms=1.01 / turn,
            min_ms=0.98 / turn,
            max_ms=1.02 / turn,
            iterations=50,
        )
        baseline = TimingStats(
            name="cublas", median_ms=0.5, p25_ms=0.49, p75_ms=0.51, min_ms=0.48, max_ms=0.52, iterations=50
        )
        listing = (sass or {}).get(turn)
        result = EvalResult(
            task="gemm_n7168_k5120",
            target="hopper",
            executor="synthetic",
            source_sha256="0" * 64,
            status=Status.passed,
            stages=Stages(
                build=BuildStage(status=Status.passed),
                static=StaticStage(
                    status=Status.passed,
                    required_family="GMMA",
                    required_present=True,
                    families={"GMMA": 4},
                    sass_path=str(listing) if listing else None,
                ),
                timing=TimingStage(
                    status=Status.passed, candidate=candidate, baselines=[baseline], speedup=0.5 * turn
                ),
            ),
        )
        t += 10
        events.append(Evaluation(ts=t, turn=turn, result=result))
        events.append(
            Message(ts=t + 0.1, turn=turn, role="user", content="synthetic feedback", source="workbench")
        )
    events.append(SessionEnd(ts=t + 1, turn=turns, reason="turn_limit"))
    start = SessionStart(
        ts=1_760_000_000.0,
        session_id="bench",
        task="gemm_n7168_k5120",
        target="hopper",
        model="synthetic",
        settings={"turns": turns},
    )
    with SessionWriter(path, start) as writer:
        for event in events:
            writer.append(event)
    return path


COLD_START = """
import sys, time
from pathlib import Path
from workbench.session.log import read_session
from workbench.tui.app import WorkbenchApp
from workbench.tui.drivers.replay import ReplayDriver

class Timed(WorkbenchApp):
    def on_ready(self) -> None:
        print(time.time(), flush=True)
        self.exit()

Timed.for_driver(ReplayDriver(read_session(Path(sys.argv[1])), paused=True)).run(headless=True, size=(160, 48))
"""


def cold_start(session: Path, runs: int) -> list[float]:
    """Process start to the first frame (the app's Ready event), headless, in a fresh interpreter."""
    times = []
    for _ in range(runs):
        began = time.time()
        out = subprocess.run(
            [sys.executable, "-c", COLD_START, str(session)], check=True, capture_output=True, text=True
        )
        times.append(float(out.stdout.strip().splitlines()[-1]) - began)
    return times


async def settle(pilot, until) -> None:  # type: ignore[no-untyped-def]
    for _ in range(10_000):
        if until():
            return
        await pilot.pause()
    raise RuntimeError("never settled")


async def switch_to_big_turn(session: Path, runs: int, cold: bool) -> tuple[list[float], list[float], int]:
    """From turn 1 to turn 2 (a 20k-instruction SASS) with the SASS tab open, laid out and painted.

    `cold`: the listing is read and parsed on the switch; otherwise it was parsed in the background
    when the turn's verdict arrived (what happens in a session). The time is the action plus one
    forced layout and paint of the screen (what a frame costs), without the test harness's idle waits;
    the second list is the time until the harness finds the app idle again (its polling included).
    """
    times = []
    idle = []
    lines = 0
    for _ in range(runs):
        driver = ReplayDriver(read_session(session), speed=1000, sleep=_instant)
        app = WorkbenchApp.for_driver(driver)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, lambda d=driver: d.state == "ended")
            screen = app.screen
            assert isinstance(screen, SessionScreen)
            await pilot.press("3", "left_square_bracket")
            # The background parse of turn 2's listing, started when its verdict arrived.
            await settle(
                pilot, lambda a=app: not [w for w in a.workers if w.group == "prefetch" and w.is_running]
            )
            if cold:
                screen.artifacts = type(screen.artifacts)()
            began = time.perf_counter()
            screen.action_next_turn()
            screen._on_timer_update()  # lay out and paint now
            times.append(time.perf_counter() - began)
            await pilot.pause()
            idle.append(time.perf_counter() - began)
            lines = len(screen.query_one(CodePane).document("sass").lines)
            await pilot.press("left_square_bracket")
            await pilot.pause()
    return times, idle, lines


async def _instant(_: float) -> None:
    await asyncio.sleep(0)


async def stream_tokens(session: Path, tokens: int, runs: int) -> list[float]:
    """1,500 tokens arriving as fast as the loop can send them, until the last one is on screen."""
    times = []
    for _ in range(runs):
        driver = ReplayDriver(read_session(session), speed=1000, sleep=_instant, paused=True)
        app = WorkbenchApp.for_driver(driver)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, SessionScreen)
            pieces = [f"tok{i} " if i % 40 else f"tok{i}\n\n" for i in range(tokens)]
            began = time.perf_counter()
            for piece in pieces:
                await screen.ingest(TextDelta(turn=1, text=piece))
            await screen.ingest(Message(turn=1, role="assistant", content="".join(pieces), source="model"))
            screen._on_timer_update()  # lay out and paint the whole answer now
            times.append(time.perf_counter() - began)
    return times


async def replay_fast(session: Path, speed: float) -> tuple[float, float]:
    """Wall time of a whole replay at `speed`, against the recorded time over `speed`."""
    read = read_session(session)
    recorded = read.events[-1].ts - read.events[0].ts
    driver = ReplayDriver(read, speed=speed)
    app = WorkbenchApp.for_driver(driver)
    async with app.run_test(size=SIZE) as pilot:
        began = time.perf_counter()
        await settle(pilot, lambda: driver.state == "ended")
        wall = time.perf_counter() - began
    return wall, recorded / speed


def line(name: str, values: list[float], goal: str) -> None:
    goal = f"  goal {goal}" if goal else ""
    print(
        f"{name:<44} median {statistics.median(values) * 1000:8.1f} ms"
        f"  (min {min(values) * 1000:.1f}, max {max(values) * 1000:.1f}, n={len(values)}){goal}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    WORK.mkdir(exist_ok=True)
    small = synthetic_session(WORK / "small.jsonl", 2)
    big = synthetic_session(WORK / "big.jsonl", 2, sass={2: big_sass()})
    sixteen = synthetic_session(WORK / "sixteen.jsonl", 16)

    line("cold start to first frame (headless)", cold_start(small, args.runs), "<= 1000 ms")
    switch, idle, lines = asyncio.run(switch_to_big_turn(big, args.runs, cold=False))
    line(f"switch to a turn with {lines:,}-line SASS", switch, "<= 100 ms")
    line("  same, until the app is idle again", idle, "")
    switch, idle, lines = asyncio.run(switch_to_big_turn(big, args.runs, cold=True))
    line("  same, listing not parsed ahead (cold)", switch, "<= 100 ms")
    line("  cold, until the app is idle again", idle, "")
    line(
        "stream 1,500 tokens into the conversation",
        asyncio.run(stream_tokens(small, 1500, args.runs)),
        "<= 1000 ms",
    )
    wall, ideal = asyncio.run(replay_fast(sixteen, 100.0))
    print(f"{'replay 16 turns at speed 100':<44} wall {wall:8.2f} s   (recorded time / 100 = {ideal:.2f} s)")


if __name__ == "__main__":
    main()
