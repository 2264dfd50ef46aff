"""A stand-in for Nsight Compute's offline metric listing, for tests on a machine without ncu, and the name
of the kernel its warm range profiles."""

from __future__ import annotations

import stat
from pathlib import Path

# torch's fill kernel as ncu prints it with --print-kernel-base mangled: an ncu run's warm-range launch
FILL = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_"


def stand_in_ncu(folder: Path, listing: str, exit_code: int = 0) -> Path:
    """An executable answering `--query-metrics --chip CHIP` as ncu does, counting the times it is asked."""
    (folder / "listing.txt").write_text(listing)
    script = folder / "ncu"
    script.write_text(
        f'#!/bin/sh\necho "$@" >> "{folder}/asked"\ncat "{folder}/listing.txt"\nexit {exit_code}\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script
