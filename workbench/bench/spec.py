"""The sweep spec (TOML): models × tasks × targets × variants × trajectories, and its expansion.

A spec names what to run; `plan` turns it into one `TrajectoryKey` per session file, in a fixed order,
so a resumed sweep finds every trajectory where the first run put it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from workbench.agent.config import ContextPolicy
from workbench.errors import UserError
from workbench.evaluate.request import Language
from workbench.tasks import Catalogue
from workbench.tasks.targets import TargetName

SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
Name = Annotated[str, Field(pattern=SLUG.pattern, max_length=64)]


def _hopper_only() -> list[TargetName]:
    return ["hopper"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Variant(_Strict):
    """One arm of an ablation: the knowledge pack on or off, a pack variant, the context policy."""

    name: Name
    pack: bool = True
    pack_variant: str | None = None
    context: ContextPolicy = "full"


class ModelOptions(_Strict):
    """Options every litellm model of the sweep gets; scripted and replay models ignore them."""

    api_base: str | None = None
    temperature: float | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    retries: int = Field(default=4, ge=0, description="retries of a rate-limited or failed call")
    backoff_s: float = Field(default=2.0, ge=0, description="first retry delay; doubles each retry")


class SweepSpec(_Strict):
    name: Name
    models: list[str] = Field(min_length=1)
    tasks: list[str] = Field(min_length=1, description="names, globs, or `headline`")
    targets: list[TargetName] = Field(default_factory=_hopper_only, min_length=1)
    trajectories: int = Field(default=12, ge=1, le=1000)
    turns: int = Field(default=8, ge=1, le=100)
    executor: str | list[str] = "static"
    concurrency: int = Field(default=4, ge=1, le=256, description="model calls in flight")
    variants: list[Variant] = Field(default_factory=lambda: [Variant(name="default")], min_length=1)
    cost_limit: float | None = Field(default=None, gt=0, description="USD for the whole sweep")
    target_speedup: float = Field(default=1.0, gt=0)
    workload: str | None = None
    language: Language = Field(default="cuda", description="cuda (.cu kernels) or triton (kernel.py)")
    model_options: ModelOptions = Field(default_factory=ModelOptions)

    @field_validator("models", "tasks")
    @classmethod
    def _distinct(cls, values: list[str]) -> list[str]:
        stripped = [v.strip() for v in values]
        if any(not v for v in stripped):
            raise ValueError("an empty entry")
        if len(set(stripped)) != len(stripped):
            raise ValueError("an entry is listed twice")
        if "human" in stripped:
            raise ValueError("a sweep runs unattended: `human` cannot be one of its models")
        return stripped

    @field_validator("variants")
    @classmethod
    def _distinct_variants(cls, values: list[Variant]) -> list[Variant]:
        if len({v.name for v in values}) != len(values):
            raise ValueError("two variants share a name")
        return values

    @field_validator("executor")
    @classmethod
    def _executors(cls, value: str | list[str]) -> str | list[str]:
        for spec in [value] if isinstance(value, str) else value:
            if spec not in ("static", "local") and not spec.startswith("ssh://"):
                raise ValueError(f"unknown executor {spec!r} (static, local or ssh://host)")
        specs = [value] if isinstance(value, str) else value
        if not specs:
            raise ValueError("an empty list")
        if "static" in specs and len(set(specs)) > 1:
            raise ValueError("`static` judges no GPU tier: it cannot share a sweep with GPU executors")
        return value

    @model_validator(mode="after")
    def _language_executor(self) -> SweepSpec:
        if self.language == "triton" and any(e.startswith("ssh://") for e in self.executors):
            raise ValueError(
                "a triton sweep runs on the static or local executor (Triton builds where it judges), not over ssh"
            )
        return self

    @property
    def executors(self) -> list[str]:
        return [self.executor] if isinstance(self.executor, str) else list(self.executor)

    def resumable_as(self, other: SweepSpec) -> bool:
        """Whether `other` runs the same trajectories (only the limits and the pools may differ)."""
        loose = {"concurrency", "cost_limit", "executor"}
        return self.model_dump(exclude=loose) == other.model_dump(exclude=loose)


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "spec"
    return f"{where}: {first['msg']}"


def parse_spec(text: str, where: str, base: Path) -> SweepSpec:
    """A spec from TOML text; `scripted:` and `replay:` paths are taken relative to `base`."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{where}: not TOML ({exc})") from None
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise UserError(f"{where}: {_first_error(exc)}") from None
    models = [_anchor(model, base) for model in spec.models]
    return spec.model_copy(update={"models": models})


def load_spec(path: Path) -> SweepSpec:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read the spec ({exc})") from None
    return parse_spec(text, str(path), path.resolve().parent)


def _anchor(model: str, base: Path) -> str:
    """`scripted:FILE` / `replay:FILE` with FILE made absolute, so the sessions name the file used."""
    for prefix in ("scripted:", "replay:"):
        if model.startswith(prefix):
            file = Path(model.removeprefix(prefix)).expanduser()
            return prefix + str(file if file.is_absolute() else (base / file).resolve())
    return model


def select_tasks(patterns: list[str], catalogue: Catalogue) -> list[str]:
    """Catalogue names in catalogue order: exact names, shell globs, and `headline` (the five)."""
    chosen: list[str] = []
    for pattern in patterns:
        if pattern == "headline":
            found = [n for n, t in catalogue.tasks.items() if t.facts is not None and t.facts.headline]
        elif any(ch in pattern for ch in "*?["):
            found = fnmatch.filter(catalogue.tasks, pattern)
        else:
            catalogue.get(pattern)  # an unknown name is one line naming the nearest ones
            found = [pattern]
        if not found:
            raise UserError(f"tasks: {pattern!r} matches no task; `ptxwb tasks` lists them")
        chosen.extend(name for name in found if name not in chosen)
    return chosen


@dataclass(frozen=True, order=True)
class TrajectoryKey:
    """One trajectory of a cell; a cell is (run, model, target, task, variant)."""

    run: str
    model: str
    target: str
    task: str
    variant: str
    trajectory: str

    @property
    def cell(self) -> tuple[str, str, str, str, str]:
        return (self.run, self.model, self.target, self.task, self.variant)


@dataclass(frozen=True)
class Planned:
    key: TrajectoryKey
    variant: Variant
    relpath: str
    """The session file, relative to the sweep folder."""


def model_slug(model: str) -> str:
    """A file-name part for a model string, with a short hash so that two models never share it."""
    readable = Path(model.split(":", 1)[1]).stem if model.startswith(("scripted:", "replay:")) else model
    prefix = model.split(":", 1)[0] + "-" if model.startswith(("scripted:", "replay:")) else ""
    text = re.sub(r"[^A-Za-z0-9_.-]+", "-", prefix + readable).strip("-.")[:48]
    return f"{text}-{hashlib.sha256(model.encode()).hexdigest()[:6]}"


def plan(spec: SweepSpec, catalogue: Catalogue | None = None) -> list[Planned]:
    """Every trajectory of the sweep, grouped by cell, each with its own session file."""
    tasks = select_tasks(spec.tasks, catalogue or Catalogue.load())
    planned: list[Planned] = []
    for variant in spec.variants:
        for model in spec.models:
            slug = model_slug(model)
            for target in spec.targets:
                for task in tasks:
                    for index in range(spec.trajectories):
                        trajectory = f"t{index:03d}"
                        key = TrajectoryKey(spec.name, model, target, task, variant.name, trajectory)
                        name = f"{slug}__{task}__{target}__{variant.name}__{trajectory}.jsonl"
                        planned.append(Planned(key, variant, f"sessions/{name}"))
    return planned
