"""Options several commands share, defined once so their names and help read the same everywhere."""

from __future__ import annotations

from typing import Annotated

import typer

NoWorkerService = Annotated[
    bool,
    typer.Option(
        "--no-worker-service",
        help="Judge in a GPU worker of this command's own, started and ended with it, instead of the warm "
        "per-user worker service (also PTXWB_NO_WORKER_SERVICE=1).",
    ),
]
