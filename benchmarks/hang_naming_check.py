"""GPU check: what a timeout says for the corpus's hanging kernels (`tests/gpu/faults/infinite_loop.cu`,
`hang_after_prologue.cu`, `hang_first_of_two.cu`), each through the local executor with a short call limit
and no memcheck: the status and the message, one JSON line each. The GPU tests assert the same messages;
this is the quick look when there is no time for their corpus build.

`python benchmarks/hang_naming_check.py [--call-timeout S]`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path

from workbench.evaluate.local_executor import LocalExecutor
from workbench.evaluate.request import EvalRequest
from workbench.tasks import resolve_task

FAULTS = Path(__file__).resolve().parent.parent / "tests" / "gpu" / "faults"
TASK = "gemm_n7168_k5120"


async def check(call_timeout_s: float) -> None:
    workload = resolve_task(TASK).smallest_workload().uuid
    executor = LocalExecutor(Path(tempfile.mkdtemp(prefix="ptxwb-hang-")), worker_service=False)
    try:
        for name in ("infinite_loop", "hang_after_prologue", "hang_first_of_two"):
            request = EvalRequest(
                task=TASK,
                target="hopper",
                source=(FAULTS / f"{name}.cu").read_text(),
                workload=workload,
                call_timeout_s=call_timeout_s,
                sanitize=False,
            )
            result = await executor.evaluate(request)
            correctness = result.stages.correctness
            print(
                json.dumps(
                    {"fault": name, "status": correctness.status.value, "message": correctness.message}
                )
            )
    finally:
        await executor.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--call-timeout", type=float, default=3.0)
    asyncio.run(check(parser.parse_args().call_timeout))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
