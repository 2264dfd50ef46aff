"""What is asked of an executor, what it reports while it works, and the executor interface."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from workbench.errors import UserError
from workbench.evaluate.result import EvalResult, Status
from workbench.tasks.targets import TargetName

StageName = Literal["build", "static", "correctness", "dynamic", "timing"]
Language = Literal["cuda", "triton"]
LANGUAGES: tuple[Language, ...] = ("cuda", "triton")


class EvalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str = Field(description="catalogue task name, or a path to a Definition JSON")
    target: TargetName
    source: str = Field(description="the candidate's complete source: a .cu file, or a Triton kernel.py")
    language: Language = Field(
        default="cuda", description="`cuda` (.cu, the TVM-FFI ABI) or `triton` (kernel.py with a DPS `run`)"
    )
    workload: str | None = Field(
        default=None, description="workload uuid or prefix; the headline one if unset"
    )
    trials: int = Field(default=3, ge=3)
    warmup: int = Field(default=10, ge=0)
    iterations: int = Field(default=50, ge=1)
    compile_timeout_s: float = 180.0
    call_timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="the limit for one call of the candidate; unset: 200x the baseline's time, at least 10 s",
    )
    profile_timeout_s: float = 300.0
    sanitize: bool = Field(default=True, description="the memcheck gate beside correctness")
    seed: int | None = Field(
        default=None,
        ge=0,
        lt=2**62,
        description="replay an evaluation's input seeds exactly (its verdict's `seed`); unset, every "
        "evaluation draws a secret one so no call's inputs can be foreseen",
    )
    source_counters: bool = Field(
        default=False,
        description="per-instruction executed counts in the dynamic tier (ncu's SourceCounters: more "
        "replay passes of the profiled call)",
    )


def require_executor_for(language: Language, executor: str) -> None:
    """A Triton candidate is built where it is judged: on this machine (`static`, `local`), not over ssh."""
    if language == "triton" and executor.startswith("ssh://"):
        raise UserError(
            f"--language triton runs on the static or local executor (builds happen where Triton judges "
            f"them), not {executor!r}"
        )


def require_profile_for(source_counters: bool, executor: str) -> None:
    """Counts come from the dynamic tier, which the static executor never runs."""
    if source_counters and executor == "static":
        raise UserError(
            "--source-counters counts what the profiled call executed: it needs a GPU executor "
            "(--executor local or ssh://HOST), not static"
        )


class Progress(BaseModel):
    """One step of an evaluation, for live views: a stage starting or finishing."""

    stage: StageName
    state: Literal["started", "finished"]
    status: Status | None = None
    message: str = ""


ProgressCallback = Callable[[Progress], None]


class Executor(Protocol):
    """Turns a request into a verdict: `static` (no GPU), `local`, `ssh://host`."""

    name: str

    async def evaluate(
        self, request: EvalRequest, progress: ProgressCallback | None = None
    ) -> EvalResult: ...

    async def close(self) -> None:
        """Release what the executor holds (a worker process); its owner calls it once, at the end."""
        ...
