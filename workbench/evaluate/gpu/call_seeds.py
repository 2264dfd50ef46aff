"""Seeds no candidate can foresee: each GPU call's inputs come from a secret of its evaluation.

A workload's seed is public (`ptxwb task` prints it), so inputs drawn from it, or from a number next to
it, let a kernel recognise a call (the profiled one, the first trial) by its values. Every call's seed
is instead a keyed hash of the evaluation's secret, the call's role and its number: seeds of different
roles share no arithmetic, and one seed read out of the candidate's own process says nothing of the next.
The secret is recorded with the verdict once it is over, and a person replays it exactly
(`ptxwb eval --seed N`). Standard library only: the worker uses it.
"""

from __future__ import annotations

import hashlib
import secrets

SECRET_BITS = 62


def new_secret() -> int:
    return secrets.randbits(SECRET_BITS)


def call_seed(secret: int, role: str, number: int = 0) -> int:
    """The seed of call `number` of `role` (trial, fresh, timed, profile, memcheck, setup)."""
    digest = hashlib.blake2b(f"{role}/{number}".encode(), key=secret.to_bytes(8, "little"), digest_size=8)
    return int.from_bytes(digest.digest(), "little") >> (64 - SECRET_BITS)
