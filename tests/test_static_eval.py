"""The static executor end to end, the stage pipeline, and both renderings of an EvalResult."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.build_support import KERNELS, needs_nvcc, session_cache
from workbench.errors import UserError
from workbench.evaluate.executors import make_executor
from workbench.evaluate.pipeline import run_stages
from workbench.evaluate.render import feedback_text, rich_verdict
from workbench.evaluate.request import EvalRequest, Progress
from workbench.evaluate.result import (
    BuildStage,
    CorrectnessStage,
    DynamicStage,
    EvalResult,
    OutputCheck,
    StageBase,
    StaticStage,
    Status,
    TimingStage,
    TimingStats,
    Trial,
)

TASK = "gemm_n7168_k5120"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_cache(tmp_path_factory)


def evaluate(name: str, target: str, cache: Path, progress: list[Progress] | None = None) -> EvalResult:
    executor = make_executor("static", cache)
    request = EvalRequest(task=TASK, target=target, source=(KERNELS / name).read_text())  # type: ignore[arg-type]
    return asyncio.run(executor.evaluate(request, progress.append if progress is not None else None))


@needs_nvcc
def test_wgmma_kernel_passes_static_tiers_and_nothing_more(cache: Path) -> None:
    events: list[Progress] = []
    result = evaluate("wgmma_gemm.cu", "hopper", cache, events)
    assert result.executor == "static" and result.task == TASK and result.target == "hopper"
    assert result.workload_uuid and result.workload_axes == {"M": 8192}
    assert result.stages.build.status == Status.passed
    assert result.stages.static.status == Status.passed
    for name in ("correctness", "dynamic", "timing"):
        assert getattr(result.stages, name).status == Status.not_run
    assert result.status == Status.not_run, "a static pass is never a pass"
    assert result.all_ran_passed
    assert [(e.stage, e.state) for e in events] == [
        ("build", "started"),
        ("build", "finished"),
        ("static", "started"),
        ("static", "finished"),
    ]
    text = feedback_text(result)
    assert "[correctness] not run" in text and "[timing] not run" in text
    assert "families: GMMA" in text and "required GMMA: present" in text
    assert "passed" not in text.split("[correctness]")[1]
    again = EvalResult.model_validate_json(result.model_dump_json())
    assert again == result


@needs_nvcc
def test_second_evaluation_hits_the_build_cache(tmp_path: Path) -> None:
    first = evaluate("mma_sync_gemm.cu", "hopper", tmp_path)
    second = evaluate("mma_sync_gemm.cu", "hopper", tmp_path)
    assert not first.stages.build.cache_hit and second.stages.build.cache_hit
    assert second.stages.static == first.stages.static.model_copy(
        update={"duration_s": second.stages.static.duration_s}
    )


@needs_nvcc
def test_mma_sync_kernel_fails_static(cache: Path) -> None:
    result = evaluate("mma_sync_gemm.cu", "hopper", cache)
    assert result.status == Status.static_missing_family
    assert result.message.startswith("static: no GMMA instruction")
    assert not result.all_ran_passed
    assert "HMMA" in feedback_text(result)


@needs_nvcc
def test_tcgen05_kernel_passes_on_blackwell(cache: Path) -> None:
    result = evaluate("tcgen05_gemm.cu", "blackwell", cache)
    assert result.stages.static.status == Status.passed
    assert result.stages.static.required_family == "TCGEN05_MMA"


@needs_nvcc
def test_compile_error_stops_before_static(cache: Path) -> None:
    result = evaluate("compile_error.cu", "hopper", cache)
    assert result.status == Status.compile_error
    assert result.stages.static.status == Status.not_run
    assert "kernel.cu(12): error" in feedback_text(result)


def test_banned_kernel(tmp_path: Path) -> None:
    result = evaluate("banned_dlopen.cu", "hopper", tmp_path)
    assert result.status == Status.banned
    assert "line 8: [dynamic_loading]" in result.message
    assert "[library_name]" in feedback_text(result)


def test_unknown_executor_and_task_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unknown executor"):
        make_executor("cloud")
    with pytest.raises(UserError, match="unknown task"):
        evaluate_task = EvalRequest(task="gemm_nope", target="hopper", source="")
        asyncio.run(make_executor("static", tmp_path).evaluate(evaluate_task))


# ------------------------------------------------------------------ pipeline (stage-generic)


def blank_result() -> EvalResult:
    return EvalResult(task=TASK, target="hopper", executor="test", source_sha256="0" * 64)


def test_a_crashed_stage_is_a_status_and_the_other_tiers_are_still_measured() -> None:
    calls: list[str] = []

    async def ok(_: EvalResult) -> StageBase:
        calls.append("build")
        return BuildStage(status=Status.passed)

    async def crash(_: EvalResult) -> StageBase:
        calls.append("static")
        raise RuntimeError("cuobjdump exploded")

    async def correct(_: EvalResult) -> StageBase:
        calls.append("correctness")
        return CorrectnessStage(status=Status.passed)

    async def profiled(_: EvalResult) -> StageBase:
        calls.append("dynamic")
        return DynamicStage(status=Status.passed)

    result = asyncio.run(
        run_stages(
            blank_result(),
            [("build", ok), ("static", crash), ("correctness", correct), ("dynamic", profiled)],
        )
    )
    assert calls == ["build", "static", "correctness"]  # a failed static tier leaves nothing to prove
    assert result.status == Status.infrastructure_error and result.correct
    assert "cuobjdump exploded" in result.stages.static.message
    assert isinstance(result.stages.static, StaticStage)


@pytest.mark.parametrize(
    ("failing", "status", "ran", "verdict"),
    [
        ("build", Status.banned, ["build"], Status.banned),
        (
            "static",
            Status.static_missing_family,
            ["build", "static", "correctness", "timing"],
            Status.static_missing_family,
        ),
        (
            "correctness",
            Status.incorrect_numerical,
            ["build", "static", "correctness"],
            Status.incorrect_numerical,
        ),
        (
            "timing",
            Status.faster_than_light,
            ["build", "static", "correctness", "timing", "dynamic"],
            Status.faster_than_light,
        ),
        (
            "dynamic",
            Status.profile_mismatch,
            ["build", "static", "correctness", "timing", "dynamic"],
            Status.profile_mismatch,
        ),
    ],
)
def test_which_tiers_a_failure_stops_and_which_failure_is_the_verdict(failing, status, ran, verdict) -> None:
    calls: list[str] = []
    kinds = {
        "build": BuildStage,
        "static": StaticStage,
        "correctness": CorrectnessStage,
        "timing": TimingStage,
        "dynamic": DynamicStage,
    }

    def stage(name: str):
        async def run(_: EvalResult) -> StageBase:
            calls.append(name)
            return kinds[name](status=status if name == failing else Status.passed)

        return run

    order = ["build", "static", "correctness", "timing", "dynamic"]
    result = asyncio.run(run_stages(blank_result(), [(name, stage(name)) for name in order]))
    assert calls == ran
    assert result.status == verdict


def test_a_wrong_kernel_is_judged_wrong_before_it_is_judged_on_its_instructions() -> None:
    async def stage(kind, status):
        return kind(status=status)

    result = asyncio.run(
        run_stages(
            blank_result(),
            [
                ("build", lambda _: stage(BuildStage, Status.passed)),
                ("static", lambda _: stage(StaticStage, Status.static_missing_family)),
                ("correctness", lambda _: stage(CorrectnessStage, Status.incorrect_numerical)),
                ("dynamic", lambda _: stage(DynamicStage, Status.passed)),
            ],
        )
    )
    assert result.status == Status.incorrect_numerical
    assert "not run" in result.stages.dynamic.message and result.stages.dynamic.status == Status.not_run


def test_pipeline_all_passed_and_skipped_stage() -> None:
    async def skipped(_: EvalResult) -> StageBase:
        return DynamicStage(status=Status.not_run, message="ncu not installed")

    stages = [
        ("build", lambda r: _as(BuildStage, r)),
        ("static", lambda r: _as(StaticStage, r)),
        ("correctness", lambda r: _as(CorrectnessStage, r)),
        ("dynamic", skipped),
        ("timing", lambda r: _as(TimingStage, r)),
    ]
    result = asyncio.run(run_stages(blank_result(), stages))  # type: ignore[arg-type]
    assert result.stages.timing.status == Status.passed, "a stage that did not run does not stop the next"
    assert result.status == Status.not_run and "dynamic not run" in result.message


async def _as(kind: type[StageBase], _: EvalResult) -> StageBase:
    return kind(status=Status.passed)


# ------------------------------------------------------------------ rendering every tier


def full_result() -> EvalResult:
    result = blank_result()
    result.status, result.message = Status.incorrect_numerical, "correctness: output C differs"
    result.stages.build = BuildStage(status=Status.passed, message="built for sm_90a")
    result.stages.static = StaticStage(
        status=Status.passed, required_family="GMMA", required_present=True, families={"GMMA": 8, "TMA": 2}
    )
    check = OutputCheck(
        name="C",
        passed=False,
        reason="values differ",
        max_abs_error=0.5,
        max_rel_error=2.0,
        matched_ratio=0.75,
        worst_index=[3, 7],
        worst_value=1.5,
        worst_expected=1.0,
    )
    result.stages.correctness = CorrectnessStage(
        status=Status.incorrect_numerical,
        message="output C differs",
        trials=[Trial(seed=11, passed=True), Trial(seed=12, passed=False, outputs={"C": check})],
    )
    result.stages.dynamic = DynamicStage(
        status=Status.passed,
        tool="ncu",
        kernels=["(anonymous namespace)::gemm_wgmma(float const*)"],
        executed_families={"GMMA": 4096},
        required_executed=True,
        tensor_flops=5.0e11,
        task_flops=6.0e11,
        tensor_share=5 / 6,
    )
    result.stages.timing = TimingStage(
        status=Status.passed,
        method="cupti",
        l2_flush_bytes=256 * 10**6,
        candidate=TimingStats(
            name="candidate", median_ms=1.25, p25_ms=1.2, p75_ms=1.3, min_ms=1.1, max_ms=1.4, iterations=50
        ),
        baselines=[
            TimingStats(
                name="cublas", median_ms=1.0, p25_ms=0.98, p75_ms=1.02, min_ms=0.9, max_ms=1.1, iterations=50
            )
        ],
        speedup=0.8,
        tflops=512.0,
        tbps=0.4,
        faster_than_light=True,
        speed_of_light_ms=0.9,
        light_share=0.72,
        light_bound="compute",
    )
    return result


def test_feedback_text_renders_every_tier() -> None:
    text = feedback_text(full_result())
    assert text.startswith("Verdict: incorrect_numerical")
    assert "1/2 trials passed" in text
    assert "max abs err 0.5" in text and "matched 75.00%" in text and "worst at [3, 7]" in text
    assert "GMMA 4,096" in text and "tensor-pipe FLOP share: 83.3%" in text
    assert "candidate median 1.25 ms [p25 1.2 ms, p75 1.3 ms]" in text and "cublas median 1 ms" in text
    assert "speedup vs cublas: 0.800x" in text and "SPEED OF LIGHT" in text
    assert "512.0 TFLOP/s · 72% of the speed of light (compute-bound)" in text
    assert "kernels profiled with ncu: gemm_wgmma" in text
    assert "cupti timestamps, 10 warm-up + 50 timed iterations, L2 flushed (256 MB)" in text


def test_a_wait_for_another_workers_candidate_on_the_gpu_is_said_where_the_time_went() -> None:
    from workbench.evaluate.render import time_line

    result = full_result()
    result.stages.build.duration_s, result.stages.static.duration_s = 0.02, 0.005
    result.stages.correctness.duration_s, result.stages.timing.duration_s = 0.34, 0.81
    result.stages.dynamic.duration_s = 1.65
    result.phases_s = {"spawn": 0.0005, "runner_ready": 0.0001, "gpu_lock": 2.5, "load": 0.08, "begin": 2.6}
    result.duration_s = 5.5
    line = time_line(result)
    assert line is not None and line.endswith(
        "outside the stages: waiting for the GPU (another worker's candidate) 2.50 s, loading the candidate 0.08 s"
    )


def test_the_verdict_says_where_its_time_went_outside_the_stages() -> None:
    from rich.console import Console

    from workbench.evaluate.render import time_line

    # The shape of a warm service evaluation of the headline GEMM on the H200 (2026-12-03 latency run).
    result = full_result()
    result.stages.build.duration_s, result.stages.static.duration_s = 0.02, 0.005
    result.stages.correctness.duration_s, result.stages.timing.duration_s = 0.34, 0.81
    result.stages.dynamic.duration_s = 1.65
    result.phases_s = {"spawn": 0.0005, "runner_ready": 1.2691, "load": 0.0809, "queue": 0.0, "begin": 1.3544,
                       "names": 0.0021, "end": 0.1315}  # fmt: skip
    result.duration_s = 4.38
    line = time_line(result)
    assert line == (
        "time 4.38 s: build and static 0.03 s, GPU tiers 2.80 s (correctness 0.34, timing 0.81, dynamic 1.65); "
        "outside the stages: runner ready 1.27 s, loading the candidate 0.08 s, ending 0.13 s"
    )
    console = Console(width=240, record=True)
    console.print(rich_verdict(result))
    assert line in console.export_text()
    assert time_line(blank_result()) is None  # no evaluation ran: nothing to account for


def test_rich_verdict_renders_every_tier_and_keeps_brackets() -> None:
    from rich.console import Console

    console = Console(width=160, record=True)
    console.print(rich_verdict(full_result()))
    out = console.export_text()
    for word in ("build", "static", "correctness", "dynamic", "timing", "incorrect_numerical", "0.800x"):
        assert word in out
    blank = blank_result()
    blank.stages.build = BuildStage(status=Status.banned, message="line 2: [cublas] cuBLAS is not allowed")
    console = Console(width=160, record=True)
    console.print(rich_verdict(blank))
    out = console.export_text()
    assert "[cublas]" in out and out.count("not run") >= 4


def test_a_static_tier_that_could_not_read_the_sass_reports_no_missing_family() -> None:
    result = blank_result()
    result.status = result.stages.static.status = Status.infrastructure_error
    result.stages.build = BuildStage(status=Status.passed, message="built for sm_90a")
    result.stages.static = StaticStage(
        status=Status.infrastructure_error, message="cuobjdump not found", required_family="GMMA"
    )
    text = feedback_text(result)
    assert "cuobjdump not found" in text and "MISSING" not in text and "required GMMA" not in text
    result.stages.static = StaticStage(status=Status.static_missing_family, required_family="GMMA")
    assert "required GMMA: MISSING" in feedback_text(result)


@needs_nvcc
def test_a_kernel_for_another_task_is_an_abi_mismatch_before_anything_runs(cache: Path) -> None:
    # The run's shared cache: the ABI is checked against the task after the build, cached or not.
    source = (Path(__file__).parent.parent / "references" / "attention" / "mha_fwd_d128.cu").read_text()
    executor = make_executor("static", cache)
    result = asyncio.run(
        executor.evaluate(EvalRequest(task="gemm_n7168_k5120", target="hopper", source=source))
    )
    assert result.status == Status.abi_mismatch and result.stages.build.status == Status.abi_mismatch
    assert "TensorView A" in result.message and result.stages.static.status == Status.not_run
