"""One GPU stage of a session, by name: the worker's dispatch, kept apart from the session so the stage
modules (which read the session) and the session import nothing of each other's. Standard library only.
"""

from __future__ import annotations

import time

from workbench.evaluate.gpu.correctness_stage import run_correctness
from workbench.evaluate.gpu.dynamic_stage import run_dynamic
from workbench.evaluate.gpu.protocol import EvaluateRequest, StageRecord, StageRequest, Status
from workbench.evaluate.gpu.session import Session
from workbench.evaluate.gpu.timing_stage import run_timing


def run_stage(session: Session, name: str, request: StageRequest | EvaluateRequest) -> StageRecord:
    started = time.perf_counter()
    if session.failed is None:
        # The next candidate's processes start with this one's first stage and import (CPU only, about
        # 5 s on the H200) while it is judged; they touch the GPU only once its profiled call is done.
        session.worker.warm_spare(session.device, held=True)
    result: StageRecord
    if session.failed is not None:
        result = dict(session.failed)
    elif name == "correctness":
        result = run_correctness(session, int(request.get("trials", 3)))
    elif name == "timing":
        result = run_timing(session, int(request.get("warmup", 10)), int(request.get("iterations", 50)))
    elif name == "dynamic":
        result = run_dynamic(session)
    else:
        result = {"status": Status.infrastructure_error, "message": f"unknown stage {name!r}"}
    result.setdefault("duration_s", time.perf_counter() - started)
    return result
