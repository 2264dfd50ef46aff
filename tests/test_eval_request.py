"""The request's own checks: a run setting is checked once, where the request is made, with the line
the commands print (`ptxwb eval`, `ptxwb run` and `ptxwb author` call the same method)."""

from __future__ import annotations

import math

import pytest

from workbench.errors import UserError
from workbench.evaluate.request import EvalRequest, RunSettings


@pytest.mark.parametrize("value", [0.0, -1.0, math.nan])
def test_a_compile_timeout_must_be_positive(value: float) -> None:
    with pytest.raises(UserError, match=r"^--compile-timeout must be a positive number of seconds \(got "):
        RunSettings(compile_timeout_s=value)


@pytest.mark.parametrize("value", [0.0, -2.5, math.nan])
def test_a_call_timeout_must_be_positive(value: float) -> None:
    with pytest.raises(UserError, match=r"^--timeout must be a positive number of seconds \(got "):
        EvalRequest(task="t", target="hopper", source="s", call_timeout_s=value)


@pytest.mark.parametrize("value", [-1, 2**62])
def test_a_seed_is_a_verdicts_seed(value: int) -> None:
    with pytest.raises(
        UserError, match=rf"^--seed must be a verdict's seed, 0 to 2\^62 - 1 \(got {value}\)$"
    ):
        RunSettings(seed=value)


def test_good_settings_pass_and_travel_whole_into_each_candidates_request() -> None:
    settings = RunSettings(
        language="triton",
        workload="abc",
        compile_timeout_s=30,
        call_timeout_s=2.5,
        sanitize=False,
        seed=2**62 - 1,
        source_counters=True,
    )
    request = EvalRequest.of(settings, "gemm_n7168_k5120", "hopper", "src")
    assert (request.task, request.target, request.source) == ("gemm_n7168_k5120", "hopper", "src")
    assert RunSettings.model_validate(request.model_dump(exclude={"task", "target", "source"})) == settings
    assert EvalRequest.of(RunSettings(), "t", "hopper", "s").model_fields_set == {"task", "target", "source"}


def test_triton_is_refused_over_ssh_and_allowed_where_it_builds() -> None:
    settings = RunSettings(language="triton")
    with pytest.raises(
        UserError, match=r"^--language triton runs on the static or local executor .*'ssh://box'$"
    ):
        settings.require_executor("ssh://box")
    settings.require_executor("static")
    settings.require_executor("local")
    RunSettings().require_executor("ssh://box")


def test_source_counters_need_a_gpu_executor() -> None:
    with pytest.raises(UserError) as refused:
        RunSettings(source_counters=True).require_executor("static")
    assert str(refused.value) == (
        "--source-counters counts what the profiled call executed: it needs a GPU executor "
        "(--executor local or ssh://HOST), not static"
    )
    RunSettings(source_counters=True).require_executor("local")
    RunSettings().require_executor("static")
