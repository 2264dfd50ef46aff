"""Obviously synthetic sessions for the TUI tests: invented verdicts and timings, never a demo.

The model is named `synthetic-test-data`, the executor `synthetic`, and every message says so. The
PTX and SASS listings a session points at are real compiler output when the test provides them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from workbench.evaluate.result import (
    BuildStage,
    CorrectnessStage,
    DynamicStage,
    EvalResult,
    InstructionCounts,
    KernelResources,
    OutputCheck,
    Stages,
    StaticStage,
    Status,
    TimingStage,
    TimingStats,
    Trial,
)
from workbench.session.events import (
    EVENT_ADAPTER,
    Candidate,
    Evaluation,
    Event,
    Message,
    SessionEnd,
    SessionStart,
    Usage,
)
from workbench.session.log import create_new

T0 = 1_760_000_000.0
TASK = "gemm_n7168_k5120"


def kernel_source(turn: int) -> str:
    return (
        f"// synthetic test kernel, turn {turn}\n"
        "#include <cuda_bf16.h>\n"
        "__global__ void k(float* out) {\n"
        f"  out[threadIdx.x] = {turn}.0f;\n"
        '  asm volatile("wgmma.fence.sync.aligned;");\n'
        "}\n"
    )


def timing(turn: int, baselines: tuple[str, ...] = ("cublas",)) -> TimingStage:
    candidate_ms = 2.0 / (1 + 0.1 * turn)
    stats = TimingStats(
        name="candidate",
        median_ms=candidate_ms,
        p25_ms=candidate_ms * 0.99,
        p75_ms=candidate_ms * 1.01,
        min_ms=candidate_ms * 0.98,
        max_ms=candidate_ms * 1.05,
        iterations=50,
    )
    bases = [
        TimingStats(
            name=name,
            median_ms=1.0 + i / 10,
            p25_ms=0.995,
            p75_ms=1.005,
            min_ms=0.99,
            max_ms=1.02,
            iterations=50,
        )
        for i, name in enumerate(baselines)
    ]
    return TimingStage(
        status=Status.passed,
        method="events",
        candidate=stats,
        baselines=bases,
        speedup=bases[0].median_ms / candidate_ms,
    )


def incorrect_outputs() -> dict[str, OutputCheck]:
    """Two outputs failing differently, as attention's O and LSE do: each keeps its own numbers."""
    return {
        "O": OutputCheck(
            name="O", passed=False, max_abs_error=0.5, max_rel_error=5.32e4, matched_ratio=0.991
        ),
        "LSE": OutputCheck(
            name="LSE", passed=False, max_abs_error=11.5, max_rel_error=0.4, matched_ratio=0.0839
        ),
    }


def result(
    turn: int,
    kind: str,
    source: str,
    ptx: Path | None = None,
    sass: Path | None = None,
    cubin: Path | None = None,
    baselines: tuple[str, ...] = ("cublas",),
    counts: dict[str, list[InstructionCounts]] | None = None,
) -> EvalResult:
    sha = hashlib.sha256(source.encode()).hexdigest()
    common = {"task": TASK, "target": "hopper", "executor": "synthetic", "source_sha256": sha}
    if kind == "compile_error":
        build = BuildStage(
            status=Status.compile_error,
            message="nvcc failed",
            errors=['kernel.cu(4): error: identifier "oops" is undefined'],
        )
        return EvalResult(
            status=Status.compile_error,
            message="synthetic compile error",
            stages=Stages(build=build),
            **common,
        )
    build = BuildStage(
        status=Status.passed,
        resources=[KernelResources(kernel="k", registers=168, shared_bytes=49152)],
        ptx_path=str(ptx) if ptx else None,
        cubin_path=str(cubin) if cubin else None,
    )
    static = StaticStage(
        status=Status.passed,
        required_family="GMMA",
        required_present=True,
        families={"GMMA": 8, "TMA": 2, "MBARRIER": 6},
        sass_path=str(sass) if sass else None,
    )
    if kind == "missing_family":  # mma.sync where wgmma was asked for: correct and timed, no GMMA
        missing = StaticStage(
            status=Status.static_missing_family,
            message="required GMMA missing from the SASS (HMMA instead)",
            required_family="GMMA",
            families={"HMMA": 64},
            sass_path=str(sass) if sass else None,
        )
        return EvalResult(
            status=Status.static_missing_family,
            message="static: required GMMA missing from the SASS (HMMA instead)",
            stages=Stages(build=build, static=missing, timing=timing(turn, baselines)),
            **common,
        )
    if kind == "static":
        return EvalResult(
            status=Status.passed,
            message="static tier only (synthetic)",
            stages=Stages(build=build, static=static),
            **common,
        )
    if kind == "incorrect":
        failed = CorrectnessStage(
            status=Status.incorrect_numerical,
            trials=[Trial(seed=s, passed=False, outputs=incorrect_outputs()) for s in (1, 2, 3)],
        )
        return EvalResult(
            status=Status.incorrect_numerical,
            message="synthetic wrong answer",
            stages=Stages(build=build, static=static, correctness=failed),
            **common,
        )
    check = OutputCheck(name="C", passed=True, max_abs_error=0.004, max_rel_error=0.003, matched_ratio=1.0)
    correctness = CorrectnessStage(
        status=Status.passed, trials=[Trial(seed=s, passed=True, outputs={"C": check}) for s in (1, 2, 3)]
    )
    dynamic = DynamicStage(
        status=Status.passed,
        executed_families={"GMMA": 16384, "TMA": 256},
        required_executed=True,
        tensor_share=0.97,
        source_counts=counts or {},
    )
    return EvalResult(
        status=Status.passed,
        stages=Stages(
            build=build,
            static=static,
            correctness=correctness,
            dynamic=dynamic,
            timing=timing(turn, baselines),
        ),
        **common,
    )


def events(
    turns: int = 3,
    ptx: Path | None = None,
    sass: Path | None = None,
    kinds: list[str] | None = None,
    cubin: Path | None = None,
    baselines: tuple[str, ...] = ("cublas",),
    counts: dict[str, list[InstructionCounts]] | None = None,
) -> list[Event]:
    """`counts`: per-instruction counts on every timed turn's dynamic stage (as with --source-counters)."""
    kinds = kinds or ["compile_error"] + ["full"] * (turns - 1)
    out: list[Event] = [
        SessionStart(
            ts=T0,
            session_id="synthetic-0001",
            task=TASK,
            target="hopper",
            model="synthetic-test-data",
            author="scripted",
            settings={"turns": turns},
        ),
        Message(
            ts=T0 + 0.1, role="system", content="Synthetic system prompt for TUI tests.", source="workbench"
        ),
        Message(ts=T0 + 0.2, role="user", content="Synthetic task: write the kernel.", source="workbench"),
    ]
    ts = T0 + 1.0
    for turn in range(1, turns + 1):
        source = kernel_source(turn)
        ts += 2.0
        out.append(
            Message(
                ts=ts,
                turn=turn,
                role="assistant",
                source="scripted",
                content=f"Synthetic answer {turn}.\n\n```cuda\n{source}```\n",
                usage=Usage(prompt_tokens=1000 * turn, completion_tokens=200),
                cost_usd=0.001,
                latency_s=2.0,
            )
        )
        ts += 0.1
        out.append(
            Candidate(
                ts=ts,
                turn=turn,
                source=source,
                origin="model",
                sha256=hashlib.sha256(source.encode()).hexdigest(),
            )
        )
        ts += 1.0
        out.append(
            Evaluation(
                ts=ts,
                turn=turn,
                result=result(turn, kinds[turn - 1], source, ptx, sass, cubin, baselines, counts),
            )
        )
        ts += 0.1
        out.append(
            Message(
                ts=ts,
                turn=turn,
                role="user",
                source="workbench",
                content=f"Synthetic feedback for turn {turn}.",
            )
        )
    out.append(SessionEnd(ts=ts + 0.1, turn=turns, reason="turn_limit"))
    return out


def write(path: Path, session: list[Event]) -> Path:
    """The session file as a workbench before `cache:` references wrote it: the listings' absolute paths
    as given (test data here), which a reader still follows where they exist. `SessionWriter` would
    keep no path outside a build cache."""
    start = session[0]
    assert isinstance(start, SessionStart)
    with create_new(path, "a session file") as file:
        file.write("".join(EVENT_ADAPTER.dump_json(event).decode() + "\n" for event in session))
    return path
