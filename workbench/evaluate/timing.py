"""Tier 5, timing: the candidate and the vendor baseline interleaved in one process, L2 flushed before
every call, kernel time from CUPTI (CUDA events as the fallback), median and spread; the speed-of-light
check against ceilings measured on this device.

Torch only (no pydantic): stages and stats are plain dicts in `TimingStage`'s JSON shape.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from workbench.evaluate.kernel_trace import EventTrace, KernelTrace

# A result this much faster than the measured ceilings is flagged: the ceilings are what cuBLAS and a
# device copy reach here, and a hand kernel may beat those by a little, not by more than this.
LIGHT_MARGIN = 0.9


def summarize(name: str, times_ms: Sequence[float], kernels: Sequence[str] = ()) -> dict:
    """TimingStats as a dict: median, quartiles, min, max over the timed iterations."""
    ordered = sorted(times_ms)
    if len(ordered) >= 2:
        p25, _, p75 = statistics.quantiles(ordered, n=4, method="inclusive")
    else:
        p25 = p75 = ordered[0]
    return {
        "name": name,
        "median_ms": statistics.median(ordered),
        "p25_ms": p25,
        "p75_ms": p75,
        "min_ms": ordered[0],
        "max_ms": ordered[-1],
        "iterations": len(ordered),
        "kernels": sorted(set(kernels)),
    }


def speed_of_light_ms(flops: float | None, min_bytes: float | None, ceilings: dict) -> float | None:
    """max(FLOPs / measured tensor peak, bytes / measured bandwidth), in ms."""
    times = []
    if flops and ceilings.get("tensor_tflops"):
        times.append(flops / (ceilings["tensor_tflops"] * 1e12) * 1e3)
    if min_bytes and ceilings.get("bandwidth_tbps"):
        times.append(min_bytes / (ceilings["bandwidth_tbps"] * 1e12) * 1e3)
    return max(times) if times else None


@dataclass
class Baseline:
    name: str
    call: Callable[[], object]
    prepare: Callable[[], object] | None = None  # runs outside the timed window (a backward's forward)


def make_baselines(spec: dict, inputs: Sequence[object]) -> tuple[list[Baseline], list[str]]:
    """The vendor baselines for the task family, on the same inputs as the candidate (the first is the
    one speedup is measured against), and notes on baselines left out."""
    family = spec.get("family")
    named = dict(zip(spec["definition"]["inputs"], inputs, strict=True))
    if family == "gemm":
        a, b = named["A"], named["B"]
        out = torch.empty(a.shape[0], b.shape[0], dtype=a.dtype, device=a.device)
        return [Baseline("cuBLAS (torch.matmul)", lambda: torch.matmul(a, b.T, out=out))], []
    if family in ("attention_forward", "attention_backward"):
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        q, k, v = named["Q"], named["K"], named["V"]
        causal = bool(spec.get("causal"))

        def forward(q=q, k=k, v=v):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        if family == "attention_forward":
            from workbench.evaluate import flashinfer_baseline

            baselines = [Baseline("cuDNN SDPA", forward)]
            missing = flashinfer_baseline.readiness(int(q.shape[-1]))
            if missing:
                return baselines, [f"second baseline left out: {missing}"]
            call = flashinfer_baseline.forward_call(q, k, v, causal)
            return [*baselines, Baseline(flashinfer_baseline.NAME, call)], []
        grad_out = named["dO"]
        leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
        state: dict = {}

        def prepare() -> None:
            if "out" not in state:
                state["out"] = forward(*leaves)

        def backward() -> object:
            return torch.autograd.grad(state["out"], leaves, grad_out, retain_graph=True)

        return [Baseline("cuDNN SDPA backward", backward, prepare)], []
    return [], []


def _best_ms(fn: Callable[[], object], repeats: int = 10) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return min(times)


def _matmul_tflops(size: int = 8192) -> float:
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    return 2.0 * size**3 / (_best_ms(lambda: torch.matmul(a, b)) * 1e-3) / 1e12


def _copy_tbps(size: int = 1 << 31) -> float:
    src = torch.empty(size, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return 2.0 * size / (_best_ms(lambda: dst.copy_(src)) * 1e-3) / 1e12


def measure_ceilings() -> dict:
    """This device's bf16 matrix rate (cuBLAS, 8192^3, random data) and copy bandwidth (read + write)."""
    result = {
        "tensor_tflops": _matmul_tflops(),
        "bandwidth_tbps": _copy_tbps(),
        "method": "best of 10: cuBLAS bf16 8192^3 on random data; 2 GiB device copy (read + write)",
    }
    torch.cuda.empty_cache()
    return result


def l2_flush_bytes() -> int:
    l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 64 * 1024 * 1024)
    return 2 * l2


# Warm-up runs at least this long: on the H200 a GEMM's first ~50 ms under load ran up to 12 % faster
# than the rate the card then holds, in steps, so a fixed 10-iteration warm-up left the median of a
# short run on either side of a step (speedups 0.892-0.942 for one kernel over five evaluations).
WARMUP_S = 0.25
# Timed iterations: at least `iterations`, more while they fit in this long, at most MAX_ITERATIONS.
TIMED_S = 0.3
MAX_ITERATIONS = 400


def timed_iterations(minimum: int, seconds_per_round: float, budget_s: float = TIMED_S) -> int:
    """How many timed rounds to run: `minimum`, raised to what fits in `budget_s`, capped."""
    if seconds_per_round <= 0:
        return max(minimum, MAX_ITERATIONS)
    return max(minimum, min(MAX_ITERATIONS, int(budget_s / seconds_per_round)))


def run_timing(
    call: Callable[[], object],
    baselines: Sequence[Baseline],
    trace: KernelTrace | EventTrace,
    spec: dict,
    ceilings: dict,
    own_kernels: set[str] | None,
    warmup: int = 10,
    iterations: int = 50,
    warmup_s: float = WARMUP_S,
    timed_s: float = TIMED_S,
) -> dict:
    """The timing stage dict. Every round flushes L2 before each call; candidate and baselines alternate
    which goes first, so drift and order effects fall on both. The warm-up runs at least `warmup` rounds
    and `warmup_s` seconds (the card settles into its sustained clocks); then at least `iterations`
    rounds are timed, more while they fit in `timed_s`."""
    started = time.perf_counter()
    flush = torch.empty(l2_flush_bytes(), dtype=torch.uint8, device="cuda")
    entrants: list[tuple[str, Callable[[], object], Callable[[], object] | None]] = [
        ("candidate", call, None)
    ]
    entrants += [(b.name, b.call, b.prepare) for b in baselines]
    windows: dict[str, list] = {name: [] for name, _, _ in entrants}

    def one_round(number: int, keep: bool) -> None:
        order = entrants if number % 2 == 0 else list(reversed(entrants))
        for name, function, prepare in order:
            if prepare is not None:
                prepare()
            flush.zero_()
            with trace.window(name) as window:
                function()
            if keep:
                windows[name].append(window)
        if number % 10 == 9:  # keep CUPTI's buffers and the queue short
            torch.cuda.synchronize()

    rounds = 0
    warm_started = time.perf_counter()
    while rounds < warmup or rounds % 10 or time.perf_counter() - warm_started < warmup_s:
        one_round(rounds, keep=False)
        rounds += 1
    torch.cuda.synchronize()
    warmup_rounds = rounds
    count = timed_iterations(iterations, (time.perf_counter() - warm_started) / warmup_rounds, timed_s)
    trace.clear()
    for number in range(count):
        one_round(warmup_rounds + number, keep=True)
    torch.cuda.synchronize()
    trace.collect()
    stage: dict = {
        "status": "passed",
        "message": "",
        "method": trace.method,
        "warmup": warmup_rounds,
        "iterations": count,
        "l2_flush_bytes": flush.numel(),
    }
    stats: dict[str, dict] = {}
    for name, _, _ in entrants:
        times, names = [], []
        for window in windows[name]:
            span = trace.span_ms(window)
            if span is None:
                stage["status"] = "runtime_error" if name == "candidate" else "infrastructure_error"
                stage["message"] = f"{name}: a timed call launched no kernel that the trace could see"
                stage["duration_s"] = time.perf_counter() - started
                return stage
            times.append(span)
            names.extend(k.name for k in trace.kernels_in(window))
        stats[name] = summarize(name, times, names)
    candidate = stats.pop("candidate")
    if own_kernels is not None and trace.method == "cupti":
        foreign = sorted(set(candidate["kernels"]) - own_kernels)
        if foreign:
            stage["status"] = "foreign_kernel"
            stage["message"] = (
                f"timed calls launched kernels not defined in the candidate's module: {', '.join(foreign[:3])}"
            )
    stage["candidate"] = candidate
    stage["baselines"] = list(stats.values())
    flops, min_bytes = spec.get("flops"), spec.get("min_bytes")
    if flops:
        stage["tflops"] = flops / (candidate["median_ms"] * 1e-3) / 1e12
    light = speed_of_light_ms(flops, min_bytes, ceilings)
    stage["speed_of_light_ms"] = light
    stage["faster_than_light"] = bool(light and candidate["median_ms"] < LIGHT_MARGIN * light)
    if stage["baselines"]:
        primary = stage["baselines"][0]
        stage["speedup"] = primary["median_ms"] / candidate["median_ms"]
    if stage["status"] == "passed":
        stage["message"] = timing_message(stage, ceilings)
    stage["duration_s"] = time.perf_counter() - started
    return stage


def timing_message(stage: dict, ceilings: dict | None = None) -> str:
    candidate = stage["candidate"]
    spread = f"IQR {candidate['p25_ms']:.4g}-{candidate['p75_ms']:.4g}"
    text = f"candidate {candidate['median_ms']:.4g} ms median ({spread})"
    if stage.get("baselines"):
        primary = stage["baselines"][0]
        text += f"; {primary['name']} {primary['median_ms']:.4g} ms; speedup {stage['speedup']:.3f}x"
    for other in stage.get("baselines", [])[1:]:
        text += f"; {other['name']} {other['median_ms']:.4g} ms ({other['median_ms'] / candidate['median_ms']:.3f}x)"
    if stage.get("tflops"):
        text += f"; {stage['tflops']:.0f} TFLOP/s"
    if stage.get("speed_of_light_ms") and ceilings:
        text += (
            f"; speed of light {stage['speed_of_light_ms']:.4g} ms (measured here: "
            f"{ceilings['tensor_tflops']:.0f} TFLOP/s bf16, {ceilings['bandwidth_tbps']:.2f} TB/s)"
        )
    if stage.get("faster_than_light"):
        text += (
            f"; FLAGGED: faster than this device's speed of light ({stage['speed_of_light_ms']:.4g} ms from the "
            "measured tensor peak and bandwidth): check the measurement, not a result to celebrate"
        )
    if stage.get("method") == "events":
        text += " (CUDA events: CUPTI was not available)"
    return text
