"""Every GPU call's seed comes from its evaluation's secret: no arithmetic links two calls' seeds or a
call's seed to the workload's public one, and the secret replays them all."""

from __future__ import annotations

import subprocess
import sys
from itertools import pairwise
from pathlib import Path

from workbench.evaluate.gpu.call_seeds import SECRET_BITS, call_seed, new_secret
from workbench.evaluate.gpu.session import PROFILED_POSITIONS, calls_before_profiled

PTXWB = Path(sys.executable).parent / "ptxwb"


def test_a_secret_replays_every_calls_seed_and_another_secret_shares_none() -> None:
    secret, other = new_secret(), new_secret()
    roles = [
        (role, n) for role in ("setup", "same", "fresh", "timed", "profile", "memcheck") for n in range(50)
    ]
    seeds = [call_seed(secret, role, n) for role, n in roles]
    assert seeds == [call_seed(secret, role, n) for role, n in roles]
    assert len(set(seeds)) == len(seeds)
    assert not set(seeds) & {call_seed(other, role, n) for role, n in roles}
    assert all(0 <= seed < 2**SECRET_BITS for seed in seeds)
    # Consecutive calls of a role are not consecutive numbers (a seed read in one call tells nothing of the next).
    timed = [call_seed(secret, "timed", n) for n in range(50)]
    assert all(abs(b - a) > 1_000_000 for a, b in pairwise(timed))


def test_a_seed_outside_the_range_is_one_line(tmp_path: Path) -> None:
    kernel = tmp_path / "k.cu"
    kernel.write_text("// a kernel\n")
    done = subprocess.run(
        [str(PTXWB), "eval", str(kernel), "--task", "gemm_n7168_k5120", "--seed", str(2**62)],
        check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"ptxwb: --seed must be a verdict's seed, 0 to 2^62 - 1 (got {2**62})"
    ]


def test_the_profiled_calls_position_in_its_process_is_the_secrets() -> None:
    positions = [calls_before_profiled(new_secret()) for _ in range(2000)]
    assert min(positions) == 1 and max(positions) == PROFILED_POSITIONS
    assert len(set(positions)) == PROFILED_POSITIONS  # every position is drawn, none favoured away
    secret = new_secret()
    assert calls_before_profiled(secret) == calls_before_profiled(secret)  # a replay profiles the same call
