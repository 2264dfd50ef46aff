"""Settings of one agent run; recorded in the session's start event."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workbench.errors import UserError
from workbench.evaluate.request import Language

ContextPolicy = Literal["full", "latest-pair"]


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    turns: int = Field(default=8, ge=1, description="turn limit (the paper's default: 8)")
    target_speedup: float = Field(
        default=1.0, gt=0, description="stop early once every stage passed at this speedup"
    )
    cost_limit_usd: float | None = Field(
        default=None, gt=0, description="stop once the model calls cost this much"
    )
    wall_limit_s: float | None = Field(default=None, gt=0, description="stop once the session ran this long")
    context: ContextPolicy = Field(
        default="full",
        description="`full`: the whole history; `latest-pair`: the task plus the latest answer and feedback",
    )
    pack: bool = Field(default=True, description="put the target's knowledge pack in the system prompt")
    pack_variant: str | None = None
    workload: str | None = Field(
        default=None, description="workload uuid or prefix; the headline one if unset"
    )
    language: Language = Field(
        default="cuda",
        description="`cuda` (a .cu file) or `triton` (a kernel.py); sessions without it are cuda",
    )
    source_counters: bool = Field(
        default=False, description="per-instruction executed counts beside the SASS (more ncu replay passes)"
    )


def recorded_settings(settings: dict[str, object]) -> dict[str, object]:
    """The `AgentConfig` fields among a session start's `settings` (which also record executor and model)."""
    return {k: v for k, v in settings.items() if k in AgentConfig.model_fields}


def agent_config(**values: object) -> AgentConfig:
    """The settings a person gave (CLI flags, the home screen's form); the first bad one is one line."""
    try:
        return AgentConfig.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UserError(f"bad setting {where}: {first['msg']}") from None
