"""`EvalResult`: the one verdict every part renders (agent feedback, TUI, reports, sessions).

Versioned: `schema_version` changes whenever a field changes meaning. Every stage has its own status;
a stage that did not run is `not_run`, never `passed`. Version 2: the tiers are measured independently
(a missing instruction family no longer stops correctness and timing), so `correct`, `sass_verified`
and `static_passed` are read from their own stages; version 1 results still load.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from workbench.evaluate.gpu.protocol import Status

# 3: the evaluation's input seed, every timed call checked (calls_checked), the work other paths did
# (other_work_share) and the decoy status; results of 2 read unchanged (the new fields have defaults).
SCHEMA_VERSION = 3


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StageBase(_Model):
    status: Status = Status.not_run
    message: str = ""
    duration_s: float | None = None


class KernelResources(_Model):
    """ptxas's report for one kernel."""

    kernel: str
    registers: int | None = None
    spill_stores_bytes: int = 0
    spill_loads_bytes: int = 0
    stack_frame_bytes: int = 0
    shared_bytes: int = 0
    constant_bytes: int = 0


class CompilerWarning(_Model):
    code: str | None = Field(default=None, description="ptxas/nvcc code such as C7508")
    kind: str = Field(description="short class: setmaxnreg_ignored, wgmma_serialized, other")
    kernel: str | None = None
    text: str


class BuildStage(StageBase):
    build_key: str | None = None
    cache_hit: bool = False
    command: list[str] = Field(default_factory=list)
    compiler_output: str = Field(default="", description="nvcc/ptxas messages, trimmed")
    errors: list[str] = Field(default_factory=list, description="first compiler errors, verbatim")
    resources: list[KernelResources] = Field(default_factory=list)
    warnings: list[CompilerWarning] = Field(default_factory=list)
    library_path: str | None = None
    ptx_path: str | None = None
    cubin_path: str | None = None
    negated_library_path: str | None = Field(
        default=None,
        description="the library with every wgmma's A negated (a Triton candidate's: its build entry so made; "
        "build/negated.py): does the answer depend on them",
    )
    negated_note: str = Field(default="", description="why there is no negated library")
    negated_hidden: bool = Field(
        default=False,
        description="there is none because of what the candidate did: products it wrote so they cannot be negated",
    )
    toolchain: str | None = None


class StaticStage(StageBase):
    required_family: str | None = None
    required_present: bool = False
    families: dict[str, int] = Field(default_factory=dict)
    opcodes: dict[str, int] = Field(default_factory=dict)
    kernels: dict[str, dict[str, int]] = Field(default_factory=dict, description="kernel -> opcode counts")
    sass_path: str | None = None
    mma_flops_per_thread: dict[str, float] = Field(
        default_factory=dict,
        description="per matrix-multiply opcode, one thread's fewest FLOPs among the shapes the SASS holds",
    )


class Trial(_Model):
    seed: int
    passed: bool
    fresh_addresses: bool = Field(default=False, description="the extra trial that catches cached results")
    outputs: dict[str, OutputCheck] = Field(default_factory=dict)


class OutputCheck(_Model):
    name: str
    passed: bool
    reason: str = ""
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    matched_ratio: float | None = None
    worst_index: list[int] | None = None
    worst_value: float | None = None
    worst_expected: float | None = None
    rms_error_share: float | None = Field(
        default=None, description="the error's root mean square over the reference's (finite elements)"
    )


class CorrectnessStage(StageBase):
    atol: float = 1e-2
    rtol: float = 1e-2
    trials: list[Trial] = Field(default_factory=list)
    memcheck_wait_s: float | None = Field(
        default=None, description="seconds the stage waited for memcheck's answer after its own trials"
    )
    memcheck_ready: bool | None = Field(
        default=None,
        description="whether memcheck's process had made its CUDA context when the trials began "
        "(False: its start-up was in the wait)",
    )


class KernelLaunch(_Model):
    """One launch configuration of a kernel in the profiled call, as ncu reported it."""

    kernel: str
    count: int = 1
    grid: int | None = Field(default=None, description="blocks")
    block: int | None = Field(default=None, description="threads per block")
    registers: int | None = None
    dynamic_smem: int | None = None
    static_smem: int | None = None
    shared_config: int | None = Field(default=None, description="the SM's shared-memory carveout, bytes")
    blocks_per_sm: int | None = Field(default=None, description="theoretical occupancy")
    warps_per_sm: int | None = None
    max_warps: int | None = None
    limiter: str | None = None


class InstructionCounts(_Model):
    """One SASS instruction of an own kernel in the profiled call, from ncu's SourceCounters."""

    offset: int | None = Field(
        description="bytes from the kernel's first instruction, as the listing prints it (/*0040*/); "
        "None when ncu printed no address (placed by order and opcode)"
    )
    opcode: str
    executed: int = Field(description="warp-level instructions executed")
    threads: int = Field(description="thread instructions executed")
    predicated_on: int = Field(description="thread instructions executed with a true predicate")
    samples: int = Field(default=0, description="warp-state samples that found a warp at this instruction")
    stalls: dict[str, int] = Field(
        default_factory=dict, description="the samples' stall reasons (long_sb, wait, …), the largest few"
    )
    line: int | None = Field(
        default=None,
        description="the line of the candidate's kernel.cu it came from (the cubin's line table)",
    )

    def stall_text(self, most: int) -> str:
        """Its `most` main stall reasons with their shares of its samples: `wait 58%, math 25%`."""
        return ", ".join(f"{reason} {n / self.samples:.0%}" for reason, n in list(self.stalls.items())[:most])


class DynamicStage(StageBase):
    tool: str | None = None
    profiler_prepared: bool | None = Field(
        default=None,
        description="whether the profiled process had its context and the call's inputs when the stage "
        "began (False: its set-up was in the stage's time)",
    )
    profiler_warmed: bool | None = Field(
        default=None,
        description="whether ncu's first range ran in the profiled process before its candidate came "
        "(False: ncu's one-time set-up was in the stage's time)",
    )
    profiler_first_range_s: float | None = Field(
        default=None,
        description="seconds that first range took, from its ask (or the process's context, if later) to "
        "its end: what a timing stage beside it may wait for (`parts_s['profiler_warm']`)",
    )
    profiler_go_ahead_s: float | None = Field(
        default=None,
        description="seconds the go preceded this stage: the timing stage gives it once its sampling has "
        "closed, so the profiled call runs beside the trace's collection and the statistics",
    )
    ncu_s: float | None = Field(
        default=None, description="seconds from the go signal to ncu's exit: the profiled call under ncu"
    )
    workload_axes: dict[str, int] = Field(default_factory=dict)
    kernels: list[str] = Field(default_factory=list)
    launches: list[KernelLaunch] = Field(default_factory=list)
    executed_families: dict[str, int] = Field(
        default_factory=dict, description="family -> predicate-true threads"
    )
    executed_opcodes: dict[str, int] = Field(default_factory=dict)
    required_executed: bool = False
    tensor_flops: float | None = None
    task_flops: float | None = None
    tensor_share: float | None = None
    other_work_share: float | None = Field(
        default=None,
        description="FLOPs other math instructions did (a lower bound from thread counts) over the task's",
    )
    instructions_per_flop: float | None = Field(
        default=None,
        description="thread instructions outside the required family per task FLOP (gpu/negated_check.py)",
    )
    negated_passed: bool | None = Field(
        default=None,
        description="the build with every wgmma's A negated still answered right (a decoy); None: not run",
    )
    sm_throughput_pct: float | None = Field(
        default=None, description="ncu's SpeedOfLight: the SMs' busiest unit, % of its peak (source counters)"
    )
    memory_throughput_pct: float | None = Field(
        default=None, description="ncu's SpeedOfLight: the memory system's busiest unit, % of its peak"
    )
    ordinary_load_bytes: float | None = Field(
        default=None,
        description="a memory-bound task: bytes ordinary loads (LDG missing L1, LDGSTS, atomics) fetched in the call",
    )
    task_min_bytes: float | None = None
    ordinary_load_share: float | None = Field(
        default=None, description="ordinary_load_bytes over the task's minimum bytes (profile.py bounds it)"
    )
    profiled_over_timed: float | None = Field(
        default=None,
        description="the profiled call's own kernel time over the timed calls' median (agreement.py bounds it)",
    )
    ignored_kernels: list[str] = Field(
        default_factory=list, description="profiled in the call but not the candidate's own: never counted"
    )
    source_counts: dict[str, list[InstructionCounts]] = Field(
        default_factory=dict,
        description="own kernel (mangled) -> its instructions in address order, when the evaluation asked "
        "for source counters",
    )


class TimingStats(_Model):
    name: str
    median_ms: float
    p25_ms: float
    p75_ms: float
    min_ms: float
    max_ms: float
    iterations: int
    kernels: list[str] = Field(default_factory=list)


class TimingStage(StageBase):
    method: Literal["cupti", "events", "wall"] | None = None
    warmup: int = 10
    iterations: int = 50
    l2_flush_bytes: int | None = None
    settings_set_aside: list[str] = Field(
        default_factory=list,
        description="context or stream settings the candidate changed: its calls ran under its own, the "
        "baselines' under the context's initial ones",
    )
    candidate: TimingStats | None = None
    baselines: list[TimingStats] = Field(default_factory=list)
    speedup: float | None = Field(default=None, description="primary baseline median / candidate median")
    tflops: float | None = None
    tbps: float | None = Field(
        default=None, description="the task's minimum bytes over the candidate's median"
    )
    speed_of_light_ms: float | None = None
    speed_of_light_source: str | None = Field(
        default=None, description="the datasheet peaks the bound is from"
    )
    light_share: float | None = Field(
        default=None, description="speed of light / candidate median: the share of the roofline reached"
    )
    light_bound: Literal["compute", "memory"] | None = Field(
        default=None, description="which datasheet peak sets the speed of light"
    )
    faster_than_light: bool = False
    host_overhead_ms: float | None = Field(
        default=None, description="median clock time of a timed call beyond its kernels' GPU time"
    )
    baseline_host_overhead_ms: float | None = None
    empty_call_ms: float | None = Field(
        default=None,
        description="median clock time of the candidate's path with an empty function in its place",
    )
    host_excess_ms: float | None = Field(
        default=None,
        description="median clock time of a timed call beyond its kernels and the empty call beside it (a "
        "Triton candidate's: beyond its kernels and the baseline's host path)",
    )
    host_charged_ms: float | None = Field(
        default=None, description="host time per call beyond the allowance, added to the candidate's times"
    )
    calls_checked: int | None = Field(
        default=None,
        description="timed calls whose outputs the judge checked against the reference: all of them",
    )
    checked_calls: list[Trial] = Field(
        default_factory=list, description="the failing timed call, else three of the checked ones at random"
    )
    parts_s: dict[str, float] = Field(
        default_factory=dict,
        description="the stage's wall seconds by part: warm_up, timed_rounds (of which checks: the judge "
        "reading every timed call's outputs, and within it checks.draw, .copy, .inputs, .library, "
        ".reference and .compare as the judge timed them; counters: sampling the candidate's calls, by "
        "the judge's counters.start, .lead, .settle, .stop, .decode and .evaluate; gap.ENTRANT: each "
        "entrant's kept calls' waits between its L2 flush and its call), collect (the trace), statistics",
    )


class Stages(_Model):
    build: BuildStage = Field(default_factory=BuildStage)
    static: StaticStage = Field(default_factory=StaticStage)
    correctness: CorrectnessStage = Field(default_factory=CorrectnessStage)
    dynamic: DynamicStage = Field(default_factory=DynamicStage)
    timing: TimingStage = Field(default_factory=TimingStage)

    def in_order(self) -> list[tuple[str, StageBase]]:
        return [
            (name, getattr(self, name)) for name in ("build", "static", "correctness", "dynamic", "timing")
        ]


class EvalResult(_Model):
    schema_version: int = SCHEMA_VERSION
    status: Status = Status.not_run
    message: str = ""
    task: str
    target: str
    workload_uuid: str | None = None
    workload_axes: dict[str, int] = Field(default_factory=dict)
    executor: str
    source_sha256: str
    device: str | None = None
    seed: int | None = Field(
        default=None,
        description="the secret every GPU call's inputs came from (`ptxwb eval --seed` replays it)",
    )
    stages: Stages = Field(default_factory=Stages)
    kernel_names: dict[str, str] = Field(
        default_factory=dict,
        description="mangled symbol -> demangled name, for the kernels the dynamic and timing tiers name",
    )
    started_at: float | None = None
    duration_s: float | None = None
    phases_s: dict[str, float] = Field(
        default_factory=dict,
        description="wall seconds spent outside the stages (starting the GPU processes, the judge's set-up, "
        "loading the candidate, ending), by phase",
    )

    def stages_that_ran(self) -> list[tuple[str, StageBase]]:
        return [(name, stage) for name, stage in self.stages.in_order() if stage.status != Status.not_run]

    @property
    def correct(self) -> bool:
        """The paper's correct: the correctness tier passed, whatever instructions the kernel used."""
        return self.stages.correctness.status == Status.passed

    @property
    def sass_verified(self) -> bool:
        """The paper's SASS-verified: correct, and the target's required family proven executed."""
        return self.correct and self.stages.dynamic.status == Status.passed

    @property
    def static_passed(self) -> bool:
        """Build and static tier passed: what a machine without a GPU can establish."""
        return self.stages.build.status == Status.passed and self.stages.static.status == Status.passed

    @property
    def speedup(self) -> float | None:
        """Baseline median over candidate median, counted only for a correct kernel whose timing passed."""
        timing = self.stages.timing
        return timing.speedup if self.correct and timing.status == Status.passed else None

    @property
    def all_ran_passed(self) -> bool:
        ran = self.stages_that_ran()
        return bool(ran) and all(stage.status == Status.passed for _, stage in ran)


Trial.model_rebuild()
