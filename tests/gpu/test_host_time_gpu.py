"""On a Hopper GPU: host time a µs-scale kernel spends on every call beyond the empty call beside it is
counted into its time, and an honest reference's is not (`benchmarks/host_time.py` prints the spread).

Run on the GPU host from the checkout: `python -m pytest -m gpu -n 0 -s tests/gpu/test_host_time_gpu.py`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from benchmarks.host_time import DECODE, ROOT, decode_with
from workbench.evaluate.gpu.timing import EMPTY_CALL_FLOOR_MS, EMPTY_CALL_SHARE
from workbench.evaluate.local_executor import LocalExecutor
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import EvalResult, Status

pytestmark = pytest.mark.gpu


def _both(tmp_path: Path) -> tuple[EvalResult, EvalResult]:
    honest = (ROOT / DECODE[0]).read_text()
    waiting = decode_with("host_wait_200us")
    executor = LocalExecutor(tmp_path / "builds")

    async def go() -> tuple[EvalResult, EvalResult]:
        try:
            first = await executor.evaluate(EvalRequest(task=DECODE[1], target="hopper", source=honest))
            second = await executor.evaluate(EvalRequest(task=DECODE[1], target="hopper", source=waiting))
            return first, second
        finally:
            await executor.close()

    return asyncio.run(go())


def test_host_work_on_every_call_is_counted_in_and_an_honest_call_is_not(tmp_path: Path) -> None:
    honest, waiting = _both(tmp_path)
    for result in (honest, waiting):
        timing = result.stages.timing
        print(
            f"\n{result.status.value}: excess {timing.host_excess_ms} ms, counted {timing.host_charged_ms} ms"
        )
        print(f"timing: {timing.message}")
        assert result.status == Status.passed, result.message
    assert honest.stages.timing.host_charged_ms == 0
    timing = waiting.stages.timing
    assert timing.host_excess_ms is not None and timing.candidate is not None
    # 0.2 ms waited beyond the honest call's host time; the clock's noise is well under 0.06 ms.
    assert 0.14 < timing.host_excess_ms < 0.26
    span = timing.candidate.median_ms - (timing.host_charged_ms or 0.0)
    allowed = max(EMPTY_CALL_FLOOR_MS, EMPTY_CALL_SHARE * span)
    assert timing.host_charged_ms == pytest.approx(timing.host_excess_ms - allowed, abs=1e-6)
    # The time shown is the kernels' and the counted host time; the baseline's varies between the two runs.
    slow, fast = waiting.stages.timing.candidate, honest.stages.timing.candidate
    assert slow is not None and fast is not None
    assert slow.median_ms > fast.median_ms + 0.05
