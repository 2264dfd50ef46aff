"""Targets: the GPU architecture a candidate is built for. A run parameter, not part of a task."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from workbench.errors import UserError

TargetName = Literal["hopper", "blackwell"]


class Target(BaseModel, frozen=True):
    name: TargetName
    sm: str
    gencode: str
    required_family: str
    description: str


TARGETS: dict[str, Target] = {
    "hopper": Target(
        name="hopper",
        sm="sm_90a",
        gencode="arch=compute_90a,code=sm_90a",
        required_family="GMMA",
        description="Hopper (H100/H200): wgmma, TMA, mbarrier, setmaxnreg",
    ),
    "blackwell": Target(
        name="blackwell",
        sm="sm_100a",
        gencode="arch=compute_100a,code=sm_100a",
        required_family="TCGEN05_MMA",
        description="Blackwell (B200): tcgen05.mma, Tensor Memory, TMA",
    ),
}


def get_target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise UserError(f"unknown target {name!r}; choose one of: {', '.join(TARGETS)}") from None
