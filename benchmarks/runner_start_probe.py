"""Probe (GPU host): where a held spare runner's 1.5-2 s go between the worker's `start` and its `ready`
(the wait a back-to-back or one-shot evaluation sees as `runner_ready`). Times, in one fresh process,
the steps `candidate_entry.serve` takes after the hold, in its order, and prints them as one JSON line.

Run: `python benchmarks/runner_start_probe.py` (several times: the first pays cold file caches).
"""

from __future__ import annotations

import json
import time


def main() -> int:
    marks: dict[str, float] = {}
    last = time.perf_counter()

    def mark(name: str) -> None:
        nonlocal last
        now = time.perf_counter()
        marks[name] = round(now - last, 4)
        last = now

    import torch
    import tvm_ffi  # noqa: F401

    mark("import torch, tvm_ffi")
    from cupti import cupti  # noqa: F401

    mark("import cupti (no GPU)")
    # After the hold: what serve() does, step by step.
    torch.cuda.init()
    mark("cuda init")
    torch.zeros(1, device="cuda")
    mark("context (first tensor)")
    a = torch.ones(64, 64, device="cuda", dtype=torch.bfloat16)
    torch.matmul(a, a)
    torch.cuda.synchronize()
    mark("cuBLAS handle + first GEMM")
    from workbench.evaluate.gpu.kernel_trace import open_trace

    trace, note = open_trace("cuda")
    mark("open_trace (CUPTI activity on)")
    torch.cuda.get_device_name(0)
    mark("device name")
    print(
        json.dumps(
            {"trace": trace.method, "note": note, "steps_s": marks, "total_s": round(sum(marks.values()), 3)}
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
