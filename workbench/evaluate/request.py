"""What is asked of an executor, what it reports while it works, and the executor interface."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from workbench.errors import UserError
from workbench.evaluate.result import EvalResult, Status
from workbench.tasks.targets import TargetName

StageName = Literal["build", "static", "correctness", "dynamic", "timing"]
Language = Literal["cuda", "triton"]
LANGUAGES: tuple[Language, ...] = ("cuda", "triton")


class RunSettings(BaseModel):
    """How a command judges its candidates: every setting a run may change, each under the name the code
    that uses it reads. A command builds this once from its options (bad input is one clear line, the
    option's name in it) and every candidate's `EvalRequest` carries it whole."""

    model_config = ConfigDict(extra="forbid")

    language: Language = Field(
        default="cuda", description="`cuda` (.cu, the TVM-FFI ABI) or `triton` (kernel.py with a DPS `run`)"
    )
    workload: str | None = Field(
        default=None, description="workload uuid or prefix; the headline one if unset"
    )
    trials: int = Field(default=3, ge=3)
    warmup: int = Field(default=10, ge=0)
    iterations: int = Field(default=50, ge=1)
    compile_timeout_s: float = Field(default=180.0, description="nvcc's (or Triton's) time limit")
    call_timeout_s: float | None = Field(
        default=None,
        description="the limit for one call of the candidate; unset: 200x the baseline's time, at least 10 s",
    )
    profile_timeout_s: float = 300.0
    sanitize: bool = Field(default=True, description="the memcheck gate beside correctness")
    seed: int | None = Field(
        default=None,
        description="replay an evaluation's input seeds exactly (its verdict's `seed`); unset, every "
        "evaluation draws a secret one so no call's inputs can be foreseen",
    )
    source_counters: bool = Field(
        default=False,
        description="per-instruction executed counts in the dynamic tier (ncu's SourceCounters: more "
        "replay passes of the profiled call)",
    )

    # UserError, not ValueError: pydantic passes it through unwrapped, so the command prints this line.
    @field_validator("compile_timeout_s")
    @classmethod
    def _compile_timeout_positive(cls, value: float) -> float:
        if not value > 0:  # also NaN
            raise UserError(f"--compile-timeout must be a positive number of seconds (got {value:g})")
        return value

    @field_validator("call_timeout_s")
    @classmethod
    def _call_timeout_positive(cls, value: float | None) -> float | None:
        if value is not None and not value > 0:
            raise UserError(f"--timeout must be a positive number of seconds (got {value:g})")
        return value

    @field_validator("seed")
    @classmethod
    def _seed_in_range(cls, value: int | None) -> int | None:
        if value is not None and not 0 <= value < 2**62:
            raise UserError(f"--seed must be a verdict's seed, 0 to 2^62 - 1 (got {value})")
        return value

    def require_executor(self, executor: str) -> None:
        """What these settings ask of the executor `--executor` names; the commands call it once."""
        if self.language == "triton" and executor.startswith("ssh://"):
            # A Triton candidate is built where it is judged: on this machine, not over ssh.
            raise UserError(
                f"--language triton runs on the static or local executor (builds happen where Triton "
                f"judges them), not {executor!r}"
            )
        if self.source_counters and executor == "static":
            # Counts come from the dynamic tier, which the static executor never runs.
            raise UserError(
                "--source-counters counts what the profiled call executed: it needs a GPU executor "
                "(--executor local or ssh://HOST), not static"
            )


class EvalRequest(RunSettings):
    """One candidate to judge: the task, the target, the source, and the run's settings."""

    task: str = Field(description="catalogue task name, or a path to a Definition JSON")
    target: TargetName
    source: str = Field(description="the candidate's complete source: a .cu file, or a Triton kernel.py")

    @classmethod
    def of(cls, settings: RunSettings, task: str, target: TargetName, source: str) -> EvalRequest:
        """The request for one candidate of a run: `settings` travel whole, already checked."""
        return cls(task=task, target=target, source=source, **settings.model_dump(exclude_unset=True))


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
