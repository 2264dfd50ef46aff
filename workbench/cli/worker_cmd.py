"""`ptxwb worker`: the per-user GPU worker service that `eval`, `run`, `author` and `bench` share."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer
from rich.table import Table

from workbench.cli.output import console, print_json
from workbench.errors import UserError

app = typer.Typer(
    help="The warm per-user GPU worker service (one per GPU) that local evaluations go through.",
    no_args_is_help=True,
)


@app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
) -> None:
    """Each running service: its GPUs, uptime, evaluations, queue, and whether a candidate is on it now."""
    from workbench.evaluate.service_client import running_statuses
    from workbench.evaluate.service_paths import ServiceFolderError, service_folder

    try:
        folder = service_folder()
        found = asyncio.run(running_statuses())
    except ServiceFolderError as exc:
        raise UserError(str(exc)) from None
    if as_json:
        print_json({"folder": str(folder), "services": found})
        return
    if not found:
        console().print(
            f"no worker service is running (folder {folder}); the next local evaluation starts one"
        )
        return
    table = Table("GPUs", "pid", "up", "evaluations", "queue", "now", "idle limit", "worker restarts")
    for info in found:
        table.add_row(
            "\n".join(info["gpus"]) or f"none ({info['label']})",
            str(info["pid"]),
            f"{info['uptime_s']:.0f} s",
            str(info["evaluations"]),
            str(info["queue"]),
            "judging" if info["busy"] else "idle",
            f"{info['idle_limit_s']:g} s",
            str(info["worker_restarts"]),
        )
    console().print(table)
    console().print(f"folder {folder} (sockets and each service's log)")


@app.command()
def stop() -> None:
    """Stop every running service of this user (a candidate being judged gets an infrastructure error)."""
    from workbench.evaluate.service_client import stop_running
    from workbench.evaluate.service_paths import ServiceFolderError

    try:
        stopped = asyncio.run(stop_running())
    except ServiceFolderError as exc:
        raise UserError(str(exc)) from None
    console().print(f"stopped {stopped} worker service{'s' if stopped != 1 else ''}")


@app.command()
def start(
    gpu: Annotated[
        str | None,
        typer.Option(
            "--gpu",
            help="The one GPU (index or UUID) it serves; default: CUDA_VISIBLE_DEVICES, else GPU 0, as "
            "an unpinned evaluation uses.",
        ),
    ] = None,
    idle: Annotated[
        float | None,
        typer.Option(
            "--idle", help="Seconds without a command before it ends (default 900, or PTXWB_WORKER_IDLE_S)."
        ),
    ] = None,
) -> None:
    """Start a service now (warm before the first evaluation); evaluations start one themselves if needed."""
    from workbench.evaluate.service_client import ServiceClient
    from workbench.evaluate.service_paths import ServiceFolderError
    from workbench.evaluate.worker_client import WorkerError

    if idle is not None and not idle > 0:
        raise UserError(f"--idle must be a number of seconds above zero, not {idle:g}")

    async def started() -> dict[str, Any]:
        client = ServiceClient(gpu, idle_s=idle)
        try:
            await client.start()
            return await client.status()
        finally:
            await client.close()

    try:
        info = asyncio.run(started())
    except (ServiceFolderError, WorkerError) as exc:
        raise UserError(f"the worker service: {exc}") from None
    gpus = ", ".join(info["gpus"]) or "no GPU"
    console().print(
        f"worker service {info['label']} running (pid {info['pid']}, {gpus}, idle limit {info['idle_limit_s']:g} s)"
    )
