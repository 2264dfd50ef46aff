"""Which revision of the workbench produced a figure: benchmark scripts stamp their output with it so a
result file can be traced to its commit, also on a machine that holds a copy without git's history."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REVISION_ENV = "PTXWB_GIT_SHA"  # set where the checkout is an archive (the GPU host's copy)
CHECKOUT = Path(__file__).resolve().parent.parent


def revision(checkout: Path = CHECKOUT) -> str:
    """The commit: `PTXWB_GIT_SHA` where set, else git's HEAD in `checkout`, else "unknown"."""
    if os.environ.get(REVISION_ENV):
        return os.environ[REVISION_ENV]
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=checkout,
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):  # no git on this machine
        return "unknown"
    return done.stdout.strip() or "unknown"
