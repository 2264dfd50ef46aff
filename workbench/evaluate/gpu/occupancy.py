"""Theoretical occupancy of one kernel launch, as CUDA's occupancy calculator works it out.

ptxas reports registers and static shared memory; the block size and the dynamic shared memory are
only known at launch (a TMA kernel's tiles are all dynamic: ptxas says 0 B). Given both, the blocks
that fit on one SM are limited by warps, registers, shared memory and the block limit; the smallest
limit wins and is named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Limiter = Literal["warps", "registers", "shared memory", "blocks"]


@dataclass(frozen=True)
class SmLimits:
    """Per-SM limits of a compute capability (CUDA C Programming Guide, technical specifications)."""

    max_warps: int = 64
    max_blocks: int = 32
    registers: int = 65536
    register_unit: int = 256  # registers are allocated per warp in units of 256
    shared_bytes: int = 233472  # 228 KiB per SM
    shared_per_block: int = 232448  # 227 KiB usable by one block
    shared_unit: int = 128
    shared_reserved: int = 1024  # the runtime keeps 1 KiB of each block's shared memory


# Hopper (sm_90a) and Blackwell (sm_100a) share these numbers.
LIMITS: dict[str, SmLimits] = {"hopper": SmLimits(), "blackwell": SmLimits()}


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    warps_per_sm: int
    max_warps: int
    limiter: Limiter

    @property
    def ratio(self) -> float:
        return self.warps_per_sm / self.max_warps

    def describe(self) -> str:
        if self.blocks_per_sm == 0:
            return f"does not fit on an SM ({self.limiter})"
        plural = "" if self.blocks_per_sm == 1 else "s"
        return (
            f"{self.blocks_per_sm} block{plural}/SM, {self.warps_per_sm}/{self.max_warps} warps "
            f"({self.ratio:.0%}, limited by {self.limiter})"
        )


def _up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def theoretical_occupancy(
    *,
    threads_per_block: int,
    registers_per_thread: int,
    static_shared_bytes: int,
    dynamic_shared_bytes: int,
    target: str = "hopper",
    shared_config_bytes: int | None = None,
) -> Occupancy:
    """`shared_config_bytes`: the shared-memory carveout the driver chose for the launch (ncu's
    launch__shared_mem_config_size); without it, the largest the SM has."""
    limits = LIMITS[target]
    sm_shared = shared_config_bytes if shared_config_bytes else limits.shared_bytes
    warps = -(-threads_per_block // 32)
    if warps <= 0:
        raise ValueError(f"a block needs at least one thread (got {threads_per_block})")
    by: dict[Limiter, int] = {"blocks": limits.max_blocks, "warps": limits.max_warps // warps}
    if registers_per_thread > 0:
        by["registers"] = limits.registers // (_up(registers_per_thread * 32, limits.register_unit) * warps)
    shared = static_shared_bytes + dynamic_shared_bytes
    if shared > limits.shared_per_block:
        by["shared memory"] = 0
    elif shared > 0:
        by["shared memory"] = sm_shared // _up(shared + limits.shared_reserved, limits.shared_unit)
    order: list[Limiter] = ["shared memory", "registers", "warps", "blocks"]  # named first on a tie
    limiter = min(order, key=lambda name: (by.get(name, limits.max_blocks + 1), order.index(name)))
    blocks = by[limiter]
    return Occupancy(blocks, blocks * warps, limits.max_warps, limiter)
