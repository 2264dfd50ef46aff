"""Theoretical occupancy: the CUDA occupancy calculator's arithmetic for Hopper and Blackwell."""

from __future__ import annotations

import pytest

from workbench.evaluate.gpu.occupancy import theoretical_occupancy


def occupancy(threads: int, registers: int, static: int = 0, dynamic: int = 0, target: str = "hopper"):  # type: ignore[no-untyped-def]
    return theoretical_occupancy(
        threads_per_block=threads,
        registers_per_thread=registers,
        static_shared_bytes=static,
        dynamic_shared_bytes=dynamic,
        target=target,
    )


def test_a_light_kernel_fills_the_sm() -> None:
    found = occupancy(128, 32)
    assert (found.blocks_per_sm, found.warps_per_sm, found.ratio) == (16, 64, 1.0)


def test_registers_limit_a_heavy_gemm() -> None:
    found = occupancy(128, 255)  # 255 registers round up to 8192 a warp
    assert (found.blocks_per_sm, found.warps_per_sm, found.limiter) == (2, 8, "registers")
    assert found.describe() == "2 blocks/SM, 8/64 warps (12%, limited by registers)"


@pytest.mark.parametrize("target", ["hopper", "blackwell"])
def test_dynamic_shared_memory_limits_a_tma_kernel_that_ptxas_reports_at_zero(target: str) -> None:
    # Three warpgroups with 200 KiB of dynamic shared memory: one block per SM, whatever ptxas said.
    found = occupancy(384, 128, static=0, dynamic=200 * 1024, target=target)
    assert (found.blocks_per_sm, found.warps_per_sm, found.limiter) == (1, 12, "shared memory")
    two = occupancy(384, 64, dynamic=110 * 1024, target=target)  # 110 KiB + 1 KiB reserved, twice: fits
    assert two.blocks_per_sm == 2


def test_more_shared_memory_than_a_block_may_have_does_not_fit() -> None:
    found = occupancy(128, 32, static=1024, dynamic=227 * 1024)
    assert found.blocks_per_sm == 0 and found.describe() == "does not fit on an SM (shared memory)"


def test_tiny_blocks_hit_the_block_limit_and_a_block_needs_a_thread() -> None:
    assert occupancy(32, 16).limiter == "blocks" and occupancy(32, 16).blocks_per_sm == 32
    with pytest.raises(ValueError, match="at least one thread"):
        occupancy(0, 32)
