"""`ptxwb session …`: look at session files."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from workbench.cli.output import console, print_json
from workbench.session import read_session

app = typer.Typer(help="Inspect, fork, export and import session files.", no_args_is_help=True)


@app.command("show")
def show(
    path: Annotated[Path, typer.Argument(help="A session .jsonl file.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Summarise a session: its start, its turns and verdicts, and anything dropped from a cut file."""
    read = read_session(path)
    start = read.start
    verdicts = [
        {"turn": e.turn, "status": e.result.status.value, "speedup": e.result.stages.timing.speedup}
        for e in read.events
        if e.type == "evaluation"
    ]
    ends = [e for e in read.events if e.type == "session_end"]
    summary = {
        "session_id": start.session_id,
        "task": start.task,
        "target": start.target,
        "model": start.model,
        "author": start.author,
        "parent_session": start.parent_session,
        "fork_turn": start.fork_turn,
        "events": dict(Counter(e.type for e in read.events)),
        "turns": read.turns(),
        "verdicts": verdicts,
        "end": ends[-1].reason if ends else None,
        "dropped_bytes": read.dropped_bytes,
        "problems": read.problems,
    }
    if as_json:
        print_json(summary)
        return
    out = console()
    out.print(f"[bold]{start.session_id}[/bold]  {start.task} on {start.target}, model {start.model} ({start.author})")
    if start.parent_session:
        out.print(f"forked from {start.parent_session} at turn {start.fork_turn}")
    table = Table(title_justify="left")
    for column in ("turn", "verdict", "speedup"):
        table.add_column(column)
    for v in verdicts:
        speedup = f"{v['speedup']:.3f}×" if v["speedup"] is not None else "—"
        table.add_row(str(v["turn"]), v["status"], speedup)
    out.print(table)
    out.print(f"ended: {summary['end'] or 'no end event (still running, or cut short)'}")
    for problem in read.problems:
        out.print(f"[yellow]{problem}[/yellow]")
