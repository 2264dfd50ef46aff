"""`ptxwb session …`: look at session files."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from workbench.cli.options import NoWorkerService
from workbench.cli.output import console, print_json
from workbench.errors import UserError
from workbench.paths import runs_dir
from workbench.session import read_session
from workbench.session.events import Candidate, Control, Evaluation, Message
from workbench.session.hostpaths import public_model
from workbench.session.log import SessionRead, kept_through

app = typer.Typer(help="Inspect, fork, export and import session files.", no_args_is_help=True)


ORIGINS = {
    "model": "model",
    "human": "the person (human model)",
    "edited": "edited by the person",
    "override": "the person's file",
}


def turn_rows(read: SessionRead) -> list[dict[str, Any]]:
    """One row per turn: whose kernel was judged (or why none was), its verdict and speedup.

    With the `human` model the person writes the answers (in the editor, or a file loaded with `o`):
    their kernels are `human`, not `model`.
    """
    author = read.start.author
    rows: dict[int, dict[str, Any]] = {
        t: {"turn": t, "origin": "no kernel", "status": None, "speedup": None} for t in read.turns()
    }
    for event in read.events:
        row = rows.get(event.turn) if event.turn is not None else None
        if row is None:
            continue
        if isinstance(event, Candidate):
            row["origin"] = "human" if event.origin == "model" and author == "human" else event.origin
        elif isinstance(event, Control) and event.action == "skip":
            row["origin"] = row["status"] = "skipped"
        elif isinstance(event, Evaluation):
            row["status"] = event.result.status.value
            row["speedup"] = event.result.stages.timing.speedup
    return list(rows.values())


def human_work(read: SessionRead) -> dict[str, int]:
    """What the person did in a session, whoever wrote the answers: edits, own files, skips, messages."""
    counts: Counter[str] = Counter()
    for event in read.events:
        if isinstance(event, Candidate) and event.origin != "model":
            counts[event.origin] += 1
        elif isinstance(event, Control) and event.action == "skip" and event.by == "human":
            counts["skipped"] += 1
        elif isinstance(event, Message) and event.source == "human":
            counts["messages"] += 1
    return {kind: counts[kind] for kind in ("edited", "override", "skipped", "messages") if counts[kind]}


def _human_note(work: dict[str, int]) -> str:
    words = {
        "edited": "edited",
        "override": "replaced with own file",
        "skipped": "skipped",
        "messages": "messages",
    }
    return ", ".join(f"{words[kind]} {count}" for kind, count in work.items())


@app.command("show")
def show(
    path: Annotated[Path, typer.Argument(help="A session .jsonl file.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Summarise a session: its start, every turn (whose kernel, verdict), and anything a cut file dropped."""
    read = read_session(path)
    start = read.start
    verdicts = [
        {"turn": e.turn, "status": e.result.status.value, "speedup": e.result.stages.timing.speedup}
        for e in read.events
        if e.type == "evaluation"
    ]
    rows = turn_rows(read)
    work = human_work(read)
    ends = [e for e in read.events if e.type == "session_end"]
    summary = {
        "session_id": start.session_id,
        "task": start.task,
        "target": start.target,
        "model": public_model(start.model),
        "author": start.author,
        "human_work": work,
        "parent_session": start.parent_session,
        "fork_turn": start.fork_turn,
        "events": dict(Counter(e.type for e in read.events)),
        "turns": read.turns(),
        "turn_rows": rows,
        "verdicts": verdicts,
        "end": ends[-1].reason if ends else None,
        "dropped_bytes": read.dropped_bytes,
        "problems": read.problems,
    }
    if as_json:
        print_json(summary)
        return
    out = console()
    by = start.author + (f"; the person: {_human_note(work)}" if work else "")
    model = public_model(start.model)  # an older session names a script by its path here
    out.print(f"[bold]{start.session_id}[/bold]  {start.task} on {start.target}, model {model} ({by})")
    if start.parent_session:
        out.print(f"forked from {start.parent_session} at turn {start.fork_turn}")
    table = Table(title_justify="left")
    for column in ("turn", "kernel", "verdict", "speedup"):
        table.add_column(column)
    for row in rows:
        speedup = f"{row['speedup']:.3f}×" if row["speedup"] is not None else "—"
        origin = ORIGINS.get(row["origin"], row["origin"])
        table.add_row(str(row["turn"]), origin, row["status"] or "—", speedup)
    out.print(table)
    out.print(f"ended: {summary['end'] or 'no end event (still running, or cut short)'}")
    for problem in read.problems:
        out.print(f"[yellow]{problem}[/yellow]")


@app.command("fork")
def fork(
    path: Annotated[Path, typer.Argument(help="The session .jsonl file to continue.")],
    turn: Annotated[int, typer.Option("--turn", help="Keep turns up to and including N; continue from N+1.")],
    model: Annotated[
        str,
        typer.Option("--model", help="A litellm model string, `human`, `replay:SESSION` or `scripted:FILE`."),
    ],
    out: Annotated[
        Path | None, typer.Option("--out", help="The new session file (default: in runs/).")
    ] = None,
    executor: Annotated[
        str | None, typer.Option("--executor", help="Default: the parent's executor.")
    ] = None,
    turns: Annotated[
        int | None, typer.Option("--turns", help="Turn limit of the fork (default: the parent's).")
    ] = None,
    api_base: Annotated[str | None, typer.Option("--api-base", help="OpenAI-compatible server URL.")] = None,
    no_worker_service: NoWorkerService = False,
) -> None:
    """Fork a session at turn N and continue it with MODEL (headless); the parent is left as it was."""
    import asyncio
    import time

    from rich.console import Console

    from workbench.agent.config import agent_config, recorded_settings
    from workbench.agent.loop import MiniPTXAgent
    from workbench.agent.models import resumed
    from workbench.cli.run_cmd import build_model, drive_headless, finish
    from workbench.evaluate.executors import make_executor

    parent = read_session(path)
    settings = recorded_settings(parent.start.settings)
    if turns is not None:
        settings["turns"] = turns
    config = agent_config(**settings)
    kept = kept_through(parent, turn)  # a turn the parent lacks is said first
    if config.turns <= turn:
        raise UserError(
            f"the fork keeps turns up to {turn} and its turn limit is {config.turns}: nothing would run "
            f"(give --turns above {turn})"
        )
    executor_spec = executor or str(parent.start.settings.get("executor", "static"))
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = out or runs_dir() / f"{path.stem}.fork{turn}-{stamp}.jsonl"
    chosen = build_model(model, api_base)
    # The parent's own script or replay goes on from the fork turn; another model starts afresh.
    agent = MiniPTXAgent.continue_from(
        parent,
        turn,
        model=resumed(chosen, kept) if public_model(model) == public_model(parent.start.model) else chosen,
        executor=make_executor(executor_spec, worker_service=False if no_worker_service else None),
        out=out,
        config=config,
    )
    console = Console(highlight=False)
    end = asyncio.run(drive_headless(agent, console, spinner=model != "human" and console.is_terminal))
    finish(end, out, console)


@app.command("export")
def export(
    path: Annotated[Path, typer.Argument(help="A session .jsonl file.")],
    fmt: Annotated[
        str, typer.Option("--format", help="mini-swe-agent (the trajectory JSON PTXBench writes).")
    ] = "mini-swe-agent",
    out: Annotated[Path | None, typer.Option("--out", help="Default: runs/SESSION.traj.json.")] = None,
) -> None:
    """Export a session as a mini-swe-agent trajectory (`info`, `messages` with `extra`, exit message)."""
    from workbench.session.interop import export_trajectory

    if fmt != "mini-swe-agent":
        raise UserError(f"unknown export format {fmt!r}; the one format is mini-swe-agent")
    written = export_trajectory(read_session(path), out or runs_dir() / f"{path.stem}.traj.json")
    print(written)


@app.command("import")
def import_(
    path: Annotated[Path, typer.Argument(help="A mini-swe-agent trajectory JSON file.")],
    out: Annotated[
        Path | None, typer.Option("--out", help="Default: the trajectory's name with .jsonl.")
    ] = None,
    task: Annotated[
        str | None, typer.Option("--task", help="For a trajectory not exported by ptxwb.")
    ] = None,
    target: Annotated[
        str | None, typer.Option("--target", help="For a trajectory not exported by ptxwb.")
    ] = None,
) -> None:
    """Import a mini-swe-agent trajectory as a session file (exactly, when ptxwb exported it)."""
    from workbench.session.interop import import_trajectory

    default = path.with_name(path.name.removesuffix(".json").removesuffix(".traj") + ".jsonl")
    print(import_trajectory(path, out or default, task=task, target=target))
