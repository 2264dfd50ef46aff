"""Executors by name: the one place that turns `--executor SPEC` into an `Executor`."""

from __future__ import annotations

from pathlib import Path

from workbench.errors import UserError
from workbench.evaluate.request import Executor

KNOWN = ("static", "local", "ssh://[user@]host[:port]")


def make_executor(spec: str, cache_dir: Path | None = None, worker_service: bool | None = None) -> Executor:
    """`static` (build + SASS, no GPU). GPU executors (`local`, `ssh://host`) register here. `local`
    reaches its worker through the per-user service unless `worker_service` is False (None: unless
    PTXWB_NO_WORKER_SERVICE says so)."""
    if spec == "static":
        from workbench.evaluate.static_executor import StaticExecutor

        return StaticExecutor(cache_dir)
    if spec == "local":
        from workbench.evaluate.local_executor import LocalExecutor

        return LocalExecutor(cache_dir, worker_service=worker_service)
    if spec.startswith("ssh://"):
        from workbench.evaluate.ssh_executor import SshExecutor

        return SshExecutor(spec)
    raise UserError(f"unknown executor {spec!r}; choose one of: {', '.join(KNOWN)}")
