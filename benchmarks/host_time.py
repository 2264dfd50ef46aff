"""How much host time honest kernels take per timed call beyond their kernels and the empty call beside them
(run on the GPU host): the spread the timing stage's uncounted allowance is set from.

Every kernel goes through every tier of the `local` executor, one worker for all:
1. the suite's references at their task's workload, from µs-scale decode to the ms-scale GEMM;
2. the Hopper kernels of the honest corpus on the headline GEMM;
3. the paged-decode reference (a µs-scale kernel) with host code honest kernels written elsewhere carry
   on every call (a device-properties query, a workspace malloc and free, a second stream), and with a
   busy wait on the host of 20 and 200 µs: host time that must be counted in, not hidden.
For each: the GPU span's median, the call's clock time beyond it, the empty call's, their paired excess,
what was counted in, the baseline's host time and the speedup. `--only SUBSTRING` (repeatable) keeps the names holding one.

`python benchmarks/host_time.py OUT.json [--only SUBSTRING ...]`
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import tempfile
from pathlib import Path

from workbench.evaluate.build.nvcc import build, build_toolchain
from workbench.evaluate.local_executor import LocalExecutor
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import EvalResult
from workbench.provenance import revision
from workbench.tasks import get_target

ROOT = Path(__file__).resolve().parent.parent
HEADLINE = "gemm_n7168_k5120"
DECODE = ("references/gqa/paged_decode_bulk.cu", "gqa_paged_decode_h24_kv8_d128_ps1")
REFERENCES = [
    DECODE,
    ("references/gdn/gdn_decode_bulk.cu", "gdn_decode_qk4_v8_d128_k_last"),
    ("references/gdn/gdn_mtp_bulk.cu", "gdn_mtp_qk4_v8_d128_k_last"),
    ("references/gqa/paged_prefill_causal.cu", "gqa_paged_prefill_causal_h24_kv8_d128_ps1"),
    ("references/gqa/ragged_prefill_causal.cu", "gqa_ragged_prefill_causal_h32_kv4_d128"),
    ("references/attention/mha_fwd_d128.cu", "mha_with_lse_d128"),
    ("references/attention/mha_bwd_d128.cu", "mha_bwd_d128"),
    ("references/fp8_gemm/fp8_gemm_1d2d_ws.cu", "fp8_gemm_nt_1d2d_n4096_k7168"),
    ("references/gemm/04_ws_persistent.cu", HEADLINE),
]
# Host code inserted at the top of the decode reference's `run`, after its early return.
ANCHOR = "  if (batch == 0) return;\n"


def host_wait(microseconds: int) -> str:
    """A busy wait on the host: host time with nothing else in it."""
    return (
        f"  {{ auto until = std::chrono::steady_clock::now() + std::chrono::microseconds({microseconds});"
        " while (std::chrono::steady_clock::now() < until) {} }\n"
    )


HOST_STYLES = {
    "device_properties": (
        "  { cudaDeviceProp prop; TVM_FFI_CHECK(cudaGetDeviceProperties(&prop, q.device().device_id) == cudaSuccess,"
        ' RuntimeError) << "properties"; }\n'
    ),
    "malloc_free": (
        "  { void* scratch = nullptr; TVM_FFI_CHECK(cudaMalloc(&scratch, 1 << 20) == cudaSuccess, RuntimeError)"
        ' << "malloc"; cudaFree(scratch); }\n'
    ),
    "stream_create": (
        "  { cudaStream_t side; TVM_FFI_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) == cudaSuccess,"
        ' RuntimeError) << "stream"; cudaStreamDestroy(side); }\n'
    ),
    "host_wait_20us": host_wait(20),
    "host_wait_200us": host_wait(200),
}


def decode_with(style: str) -> str:
    """The paged-decode reference with `HOST_STYLES[style]` at the top of every call."""
    decode = (ROOT / DECODE[0]).read_text()
    if ANCHOR not in decode:
        raise ValueError(f"{DECODE[0]}: its early return, where the host code goes, moved")
    return "#include <chrono>\n" + decode.replace(ANCHOR, ANCHOR + HOST_STYLES[style], 1)


def candidates() -> list[tuple[str, str, str]]:
    """(name, task, source) for every kernel measured."""
    found = [(Path(path).name, task, (ROOT / path).read_text()) for path, task in REFERENCES]
    honest = sorted((ROOT / "tests" / "data" / "honest").glob("*.cu"))
    found += [
        (f"honest/{p.name}", HEADLINE, p.read_text()) for p in honest if not p.stem.startswith("blackwell")
    ]
    found += [(f"decode+{style}", DECODE[1], decode_with(style)) for style in HOST_STYLES]
    return found


def row(name: str, task: str, result: EvalResult) -> dict:
    timing = result.stages.timing
    span = None
    if timing.candidate is not None:
        span = timing.candidate.median_ms - (timing.host_charged_ms or 0.0)
    return {
        "name": name,
        "task": task,
        "status": result.status.value,
        "message": result.message[:240],
        "span_ms": span,
        "host_overhead_ms": timing.host_overhead_ms,
        "empty_call_ms": timing.empty_call_ms,
        "host_excess_ms": timing.host_excess_ms,
        "host_charged_ms": timing.host_charged_ms,
        "baseline_host_overhead_ms": timing.baseline_host_overhead_ms,
        "speedup": timing.speedup,
        "iterations": timing.iterations,
    }


def show(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


async def measure(only: list[str], out: Path) -> None:
    chosen = [c for c in candidates() if not only or any(part in c[0] for part in only)]
    builds = tempfile.TemporaryDirectory(prefix="host-time-")
    cache = Path(builds.name)
    # Built concurrently first, so each evaluation's build is a cache hit and the GPU tiers run back to back.
    build_toolchain()
    target = get_target("hopper")
    await asyncio.gather(*(build(source, target, 600, cache) for _, _, source in chosen))
    executor = LocalExecutor(cache)
    report = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "git_sha": revision(),
        "rows": [],
    }
    try:
        for name, task, source in chosen:
            result = await executor.evaluate(EvalRequest(task=task, target="hopper", source=source))
            r = row(name, task, result)
            report["rows"].append(r)
            out.write_text(json.dumps(report, indent=1) + "\n")  # kept whole if the run is cut short
            print(
                f"{name:42s} {r['status']:20s} span {show(r['span_ms'])} ms · host {show(r['host_overhead_ms'])}"
                f" · empty {show(r['empty_call_ms'])} · excess {show(r['host_excess_ms'])} · counted"
                f" {show(r['host_charged_ms'])} · baseline host {show(r['baseline_host_overhead_ms'])} · speedup"
                f" {show(r['speedup'], 3)}",
                flush=True,
            )
    finally:
        await executor.close()
        builds.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", action="append", default=[])
    args = parser.parse_args()
    asyncio.run(measure(args.only, args.out))


if __name__ == "__main__":
    main()
