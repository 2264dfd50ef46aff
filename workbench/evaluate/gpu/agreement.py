"""Do the profiled call and the timed calls show the same kernels?

The dynamic proof comes from one call under Nsight Compute in its own process; the speed from calls
timed in the runner. A candidate that takes another path when it is profiled (it looked for the
profiler, or it keys on something that differs) must not keep the proof of the path it did not time:
- every timed call must launch exactly the kernels the profiled call launched, with the same grid,
  block, registers and shared memory (ncu's LaunchStats against CUPTI's records);
- the profiled call's GPU time must be close to the timed calls' (same kernels, same workload, caches
  flushed in both): a profiled path much faster or slower than the timed one is another path;
- every timed call's own hardware counters (the tensor pipe's active cycles, the FMA pipe's
  instructions), read by CUPTI's PM sampling with no replay and no serialisation, so no timed call can
  be told from another, must not fall short of what ncu counted for the profiled call: a timed path that
  leaves the proven tensor work to FFMA, or skips some of it, shows it however close its time. Nor may
  half or more of them count more than it (a timed path on mma.sync spends 1.5x the tensor-pipe cycles
  of wgmma for the same FLOPs): see `counters_against_timed`.

Standard library only.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from typing import NamedTuple

from workbench.evaluate.gpu.trace_checks import Kernel

# The profiled call's kernel time may differ from the timed calls' median by this share either way, plus
# a few microseconds (a short kernel's launch and clock ramp under the profiler). A kernel that tells the
# profiled call apart (by the GPU-side gap ncu's serialised replay leaves, by call order, by process)
# and runs another path there is caught when the paths differ by more; within it, it is not: the bound
# is what honest kernels need (every verdict keeps its ratio, `profiled_over_timed`), and it caps what
# such a path can gain. It was 1.5 until 2026-12-03.
DURATION_FACTOR = 1.08
DURATION_SLACK_MS = 0.005
DURATION_NOTE = "profiled and timed kernel time within 8 % and 5 us of each other"


class SampledCounter(NamedTuple):
    """A counter each timed call is sampled for beside ncu's count of the profiled call: its PM-sampled
    and ncu names, and how far a timed call may be from the profiled one (`counter_bound`): `share` of
    the larger, plus `per_flop` times the task's FLOPs."""

    sampled: str
    profiled: str
    share: float
    per_flop: float


# Measured on the H200 (benchmarks/results/2026-12-05_tensor_signature_probe_b594700_h200.log): over six
# calls each of cuBLAS's wgmma GEMM, Triton's wgmma and mma.sync GEMMs and an FFMA GEMM, the sampled
# values spread 0.000-0.003 % (1.2 % on cuBLAS's 45,272 FMA instructions) and equal ncu's to 4 digits;
# at 4096^3 the wgmma kernels took 134,217,728 tensor-pipe cycles and the mma.sync one 201,326,592.
# The bounds are margins chosen above that spread, not measured on honest kernels: tensor-pipe cycles
# 2 % and 0.1 % of the FLOPs at wgmma's 1024 per cycle (a path on mma.sync is +50 %); FMA-pipe
# instructions 5 % and 2 % of the FLOPs as 64-FLOP warp FFMAs (an attention kernel may skip its
# softmax rescaling on some values).
COUNTERS = {
    "tensor_cycles": SampledCounter(
        "TPC.TriageCompute.sm__pipe_tensor_cycles_active_realtime.sum",
        "sm__pipe_tensor_cycles_active.sum",
        share=0.02,
        per_flop=0.001 / 1024,
    ),
    "fma_instructions": SampledCounter(
        "TPC.TriageCompute.sm__inst_executed_pipe_fma_realtime.sum",
        "sm__inst_executed_pipe_fma.sum",
        share=0.05,
        per_flop=0.02 / 64,
    ),
}
COUNTER_FLOOR = 10_000.0  # the marker kernel beside each sampled call, and a few thousand more
COUNTER_NOTE = "tensor-pipe cycles within 2 %, FMA-pipe instructions within 5 %, of the profiled call's"


def counter_bound(name: str, profiled: float, timed: float, flops: float) -> float:
    """How far a timed call's counter `name` may be from the profiled call's."""
    counter = COUNTERS[name]
    return counter.share * max(profiled, timed) + counter.per_flop * flops + COUNTER_FLOOR


def counter_disagreements(
    profiled: dict[str, float], timed_calls: list[dict[str, float]], flops: float, fewer: bool
) -> list[tuple[str, dict]]:
    """(message, figures) for every timed call whose sampled counter is below the profiled call's beyond
    `counter_bound` (`fewer`), or above it, the first counter's calls first; empty when none is (a
    counter missing on a side is not compared). Sampling is device-wide, so anything else the GPU ran in
    a call's window can only add to its counts: one call short is proof that the timed path did less of
    the proven work, one call over is not proof alone."""
    direction = "fewer" if fewer else "more"
    found: list[tuple[str, dict]] = []
    for name in COUNTERS:
        if name not in profiled:
            continue
        for number, call in enumerate(timed_calls):
            if name not in call:
                continue
            want, got = profiled[name], call[name]
            gap = want - got if fewer else got - want
            if gap > counter_bound(name, want, got, flops):
                message = (
                    f"timed call {number + 1} counted {got:,.0f} {name.replace('_', ' ')}, {direction} "
                    f"than the profiled call's {want:,.0f} (allowed: {COUNTER_NOTE})"
                )
                found.append(
                    (message, {"counter": name, "profiled": want, "timed": got, "timed_call": number + 1})
                )
    return found


class SampledCalls(NamedTuple):
    """The timed calls' PM-sampled counters: each counted call's samples in its bracket, summed (empty
    where lost), why there are none where so, the calls (from 1) whose window outgrew the sampler's
    buffer, sized for `window_s`, and each counted call's own seconds in its window (from the runner's
    prepare to the call's answer: what the candidate's process could lengthen)."""

    calls: list[dict[str, float]]
    why: str
    outgrown: list[int]
    window_s: float
    own_s: list[float]


class CounterVerdict(NamedTuple):
    """What the timed calls' counters say against the profiled call's: `failed` is the message of a
    shortfall (the verdict's own, where the profiled call passed); `note` is said beside the verdict."""

    failed: str | None
    note: str


def counters_against_timed(
    launches: list[dict], own: set[str] | None, sampled: SampledCalls, flops: float
) -> CounterVerdict:
    """The profiled call's own kernels' counters (`launches`, ncu's) summed, against every timed call's
    (any call fewer fails; half the calls or more above it fails, fewer are noted); the sampler's reason
    where a side has none."""
    proven = [launch for launch in launches if own is None or launch["name"] in own]
    profiled: dict[str, float] = {}
    for name in COUNTERS:
        values = [launch.get("counters", {}).get(name) for launch in proven]
        if values and all(value is not None for value in values):
            profiled[name] = float(sum(values))
    stalled = ""
    if profiled and sampled.outgrown:
        # Sized from the stage's first call of the candidate, many times over (call_counters.window_for):
        # a timed call that ran that much longer than its warm-up is not counted, so it is not proved.
        first = sampled.outgrown[0]
        if not _host_stalled(sampled, first):
            return CounterVerdict(
                f"timed call {first} of {len(sampled.calls)} ran longer than the sampler's buffer holds "
                f"({sampled.window_s:.2f} s, sized from the candidate's first call in the stage), so neither "
                "it nor the calls after it were counted: a timed call far slower than the warm-up's is not "
                "proved to run the profiled path",
                "",
            )
        stalled = (
            f"timed call {first}'s window outgrew the sampler's buffer ({sampled.window_s:.2f} s) while "
            f"its prepare and call took {sampled.own_s[first - 1]:.3f} s: the host stalled outside the call, "
            "and neither it nor the calls after it were counted"
        )
    counted = [counts for counts in sampled.calls if counts]
    if not profiled or not counted:
        reason = sampled.why or (
            "this ncu did not count them" if not profiled else "no timed call was sampled"
        )
        return CounterVerdict(None, f"[the timed calls' counters were not compared: {reason}]")
    short = counter_disagreements(profiled, counted, flops, fewer=True)
    if short:
        return CounterVerdict(
            f"{short[0][0]}: the timed calls did less of the work the profiled call proved", ""
        )
    # More fails only where it is in half the calls or more: whatever else ran on the GPU beside a call
    # can only add to its counts, and a path the profiled call did not take on fewer than half of them
    # cannot move the median time the speedup is drawn from.
    excess = counter_disagreements(profiled, counted, flops, fewer=False)
    # A call counts once, whichever counter it is over on: paths that mix mma.sync and FFMA add up.
    over = {figures["timed_call"] for _, figures in excess}
    if over and 2 * len(over) >= len(counted):
        return CounterVerdict(
            f"{excess[0][0]}; {len(over)} of {len(counted)} timed calls counted more: "
            "the timed calls ran a path the profiled call did not",
            "",
        )
    if stalled:  # the calls before the stall are the proof; the note says which were counted
        return CounterVerdict(
            None, f"[{len(counted)} of {len(sampled.calls)} timed calls counted: {stalled}]"
        )
    if excess:
        return CounterVerdict(
            None,
            f"[noted, in fewer than half the timed calls ({len(over)} of {len(counted)}): {excess[0][0]}]",
        )
    # The lowest and highest call against the profiled one: how near an honest kernel comes to the bound.
    ratios = ", ".join(
        f"{name.replace('_', ' ')} {_span([c[name] / profiled[name] for c in counted if name in c])}"
        for name in COUNTERS
        if profiled.get(name) and any(name in c for c in counted)
    )
    return CounterVerdict(
        None,
        f"[{len(counted)} of {len(sampled.calls)} timed calls' counters match the profiled call's"
        + (f": {ratios} (lowest-highest)" if ratios else "")
        + "]",
    )


def _host_stalled(sampled: SampledCalls, first: int) -> bool:
    """Whether the call whose window outgrew the buffer did not take that window itself: its prepare and
    call held under half of it (the rest was the worker's and the judge's: a host stall), and at least
    half the timed calls were counted before it, so the proof still rests on most of the calls."""
    own = sampled.own_s[first - 1] if first <= len(sampled.own_s) else sampled.window_s
    return own < sampled.window_s / 2 and 2 * (first - 1) >= len(sampled.calls)


def _span(ratios: list[float]) -> str:
    low, high = f"{min(ratios):.4f}", f"{max(ratios):.4f}"
    return f"{low}x" if low == high else f"{low}-{high}x"


def durations_agree(profiled_ms: float, timed_ms: float) -> bool:
    return (
        timed_ms / DURATION_FACTOR - DURATION_SLACK_MS
        <= profiled_ms
        <= timed_ms * DURATION_FACTOR + DURATION_SLACK_MS
    )


def _product(dims: tuple[int, int, int] | list[int]) -> int:
    return math.prod(int(d) for d in dims)


def profiled_signature(launches: list[dict]) -> Counter:
    """The multiset of (name, grid size, block size, registers, dynamic smem, static smem) ncu saw."""
    keys = ("grid", "block", "registers", "dynamic_smem", "static_smem")
    return Counter(
        (launch["name"], *(launch.get("launch", {}).get(key) for key in keys)) for launch in launches
    )


def timed_signature(kernels: list[Kernel]) -> Counter:
    return Counter(
        (k.name, _product(k.grid), _product(k.block), k.registers, k.dynamic_smem, k.static_smem)
        for k in kernels
    )


def _comparable(profiled: Counter, timed: Counter) -> tuple[Counter, Counter]:
    """Both signatures reduced to the fields ncu reported (a field it did not print is not compared)."""
    reported = [i for i in range(1, 6) if all(key[i] is not None for key in profiled)]

    def reduce(signature: Counter) -> Counter:
        return Counter({(key[0], *(key[i] for i in reported)): n for key, n in signature.items()})

    return reduce(profiled), reduce(timed)


def _describe(signature: Counter) -> str:
    parts = [f"{n}x {key[0]}{list(key[1:])}" for key, n in sorted(signature.items())]
    return "; ".join(parts[:3]) + (" ..." if len(parts) > 3 else "")


def _own_only(
    profiled: list[dict], timed_calls: list[list[Kernel]], own: set[str] | None
) -> tuple[list[dict], list[list[Kernel]]]:
    """Both sides reduced to the candidate's own kernels (None: every kernel is its own)."""
    if own is None:
        return profiled, timed_calls
    return [launch for launch in profiled if launch["name"] in own], [
        [k for k in call if k.name in own] for call in timed_calls
    ]


def kernel_times(profiled: list[dict], timed_calls: list[list[Kernel]]) -> tuple[float, float] | None:
    """(the profiled call's kernel time, the timed calls' median), ms; None where ncu gave no times."""
    profiled_ns = [launch["time_ns"] for launch in profiled if launch.get("time_ns")]
    if len(profiled_ns) != len(profiled) or not profiled or not timed_calls:
        return None
    timed_ms = statistics.median(sum(k.end - k.start for k in call) / 1e6 for call in timed_calls)
    return sum(profiled_ns) / 1e6, timed_ms


def profiled_over_timed(
    profiled: list[dict], timed_calls: list[list[Kernel]], own: set[str] | None
) -> float | None:
    """The profiled call's own kernel time over the timed calls' median: kept in every verdict, so the
    spread honest kernels show (which bounds DURATION_FACTOR) is measured wherever kernels are judged."""
    profiled, timed_calls = _own_only(profiled, timed_calls, own)
    times = kernel_times(profiled, timed_calls)
    if times is None or times[1] <= 0:
        return None
    return round(times[0] / times[1], 4)


def agreement(
    profiled: list[dict], timed_calls: list[list[Kernel]], own: set[str] | None
) -> tuple[str, dict] | None:
    """(message, figures) when the profiled call disagrees with the timed calls; None when they agree.
    `profiled` are ncu's launches of the candidate's own kernels; `timed_calls` each timed call's
    own kernels from CUPTI."""
    profiled, timed_calls = _own_only(profiled, timed_calls, own)
    if not timed_calls:
        return None
    wanted = profiled_signature(profiled)
    for number, call in enumerate(timed_calls):
        want, got = _comparable(wanted, timed_signature(call))
        if want != got:
            return (
                (
                    f"timed call {number + 1} launched {_describe(got)}, the profiled call {_describe(want)}: the kernels "
                    "the dynamic tier proved are not the kernels that were timed"
                ),
                {"profiled_launches": _describe(want), "timed_launches": _describe(got)},
            )
    times = kernel_times(profiled, timed_calls)
    if times is None:
        return None
    profiled_ms, timed_ms = times
    figures = {"profiled_ms": profiled_ms, "timed_ms": timed_ms}
    if timed_ms > 0 and not durations_agree(profiled_ms, timed_ms):
        return (
            (
                f"the profiled call's kernels ran {profiled_ms:.4g} ms, the timed calls' {timed_ms:.4g} ms median "
                f"(allowed: {DURATION_NOTE}): the profiled run took another path"
            ),
            figures,
        )
    return None
