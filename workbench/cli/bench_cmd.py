"""`ptxwb bench …`: sweeps of agent sessions, their metrics, reports, PTXBench's rows, re-judging."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Self

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from workbench.cli.options import NoWorkerService
from workbench.errors import UserError

if TYPE_CHECKING:
    from workbench.bench.metrics import CellMetrics
    from workbench.bench.pivot import Pivot
    from workbench.bench.ray_backend import RayPools
    from workbench.bench.records import TrajectoryRecord

app = typer.Typer(
    name="bench",
    help="Benchmark sweeps: run a grid of agent sessions, then metrics, reports and PTXBench's rows.",
    no_args_is_help=True,
)
Folders = Annotated[list[Path], typer.Argument(help="Sweep folders (their rows are reported side by side).")]
TurnsOption = Annotated[
    str | None,
    typer.Option(
        "--turns",
        help="Turn limits T, comma-separated (default: 1 and the runs' turn budget; the smallest where they differ).",
    ),
]
IntervalsOption = Annotated[
    bool, typer.Option("--intervals", help="Show counts and 95 % intervals in the paper's table.")
]


@dataclass(frozen=True)
class Measured:
    records: list[TrajectoryRecord]
    limits: list[int]
    cells: list[CellMetrics]
    pivot: Pivot
    note: str | None
    """Where the runs' turn budgets differ, a line that says so."""


def parse_turns(text: str) -> list[int]:
    try:
        limits = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise UserError(f"--turns: expected whole numbers separated by commas, got {text!r}") from None
    if not limits or limits[0] < 1:
        raise UserError(f"--turns: turn limits must be 1 or more, got {text!r}")
    return limits


def table_console() -> Console:
    """A console for the wide table: a pipe or a file gets 160 columns, not rich's default 80."""
    return Console(highlight=False) if sys.stdout.isatty() else Console(highlight=False, width=160)


def _write(path: Path, text: str, what: str) -> None:
    from workbench.session.log import create_new

    with create_new(path, what) as file:
        file.write(text)


class SweepProgress:
    """A progress bar on a terminal; one line per finished trajectory otherwise."""

    def __init__(self, console: Console, total: int) -> None:
        self.console = console
        self.progress: Progress | None = None
        self.total = total
        self.judged = 0
        if console.is_terminal:
            self.progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=console,
            )  # fmt: skip
            self.bar = self.progress.add_task("trajectories", total=total, note="")

    def __enter__(self) -> Self:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def __call__(self, event: object) -> None:
        from workbench.bench.runner import Finished, Judged, Retrying

        if isinstance(event, Judged):
            self.judged += 1
            if self.progress is not None:
                self.progress.update(self.bar, note=f"{self.judged} evaluations")
        elif isinstance(event, Retrying):
            key = event.key
            self.console.print(
                f"[yellow]{key.model} {key.task} {key.trajectory} turn {event.turn}: retry {event.attempt} "
                f"in {event.delay_s:g} s: {event.error}[/yellow]"
            )
        elif isinstance(event, Finished):
            key, record = event.key, event.record
            if self.progress is not None:
                self.progress.advance(self.bar)
            else:
                correct = any(r.correct for r in record.rows)
                self.console.print(
                    f"done {key.model} {key.target} {key.task} {key.variant} {key.trajectory}: "
                    f"{len(record.rows)} turns, {record.end_reason or 'unfinished'}, correct={correct}"
                )


@app.command("run")
def run(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC.toml", help="The sweep spec.")],
    out: Annotated[Path, typer.Option("--out", help="The sweep folder (sessions, store).")],
    resume: Annotated[
        bool,
        typer.Option(
            "--resume", help="Finish a sweep begun in --out: finished trajectories never run again."
        ),
    ] = False,
    retry_model_errors: Annotated[
        bool,
        typer.Option(
            "--retry-model-errors", help="With --resume, also re-run trajectories a model error ended."
        ),
    ] = False,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="local|auto|ADDRESS",
            help="Evaluate on a Ray cluster: `local` starts one here, `auto` joins the one `ray start` made "
            "on this machine, HOST:PORT the head of one elsewhere. Model calls and sessions stay here.",
        ),
    ] = None,
    ray_resources: Annotated[
        str | None,
        typer.Option(
            "--ray-resources",
            metavar="NAME=AMOUNT[,…]",
            help="What each evaluation actor asks of the cluster (default GPU=1 for `local`, CPU=1 for `static`).",
        ),
    ] = None,
    no_worker_service: NoWorkerService = False,
) -> None:
    """Run every trajectory of a sweep as an agent session, headless; kill it any time, --resume finishes it."""
    from workbench.bench.folder import SweepFolder
    from workbench.bench.runner import run_sweep
    from workbench.bench.spec import load_spec, plan

    spec = load_spec(spec_path)
    text = spec_path.read_text(encoding="utf-8")
    console = Console(highlight=False)
    folder = SweepFolder(out)
    with ExitStack() as stack:
        pools = _ray_pools(stack, console, spec.executors, ray_address, ray_resources)
        with SweepProgress(console, len(plan(spec))) as view:
            summary = run_sweep(
                folder, spec, text, resume=resume, on_event=view, retry_model_errors=retry_model_errors,
                pool=pools, worker_service=False if no_worker_service else None,
            )  # fmt: skip
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(summary.end_reasons.items())) or "none"
    console.print(
        f"sweep {spec.name}: {summary.planned} trajectories, {summary.already_finished} finished before, "
        f"{summary.ran} run now ({summary.rerun} again after a cut), ends: {reasons}; ${summary.spent_usd:.4f} spent"
    )
    if summary.not_started:
        console.print(
            f"[yellow]cost limit reached: {summary.not_started} trajectories not started; "
            "raise cost_limit and --resume[/yellow]"
        )
    for lost in summary.requeued:
        console.print(
            f"[yellow]requeued {lost.task} {lost.target} candidate {lost.candidate} (attempt {lost.attempt}): "
            f"{lost.worker} was lost ({lost.error})[/yellow]"
        )
    if pools is not None and pools.made is not None:
        console.print(pools.made.report())
    console.print(f"results: {folder.store_path}")


def _ray_pools(
    stack: ExitStack, console: Console, executors: list[str], address: str | None, resources: str | None
) -> RayPools | None:
    """With --ray: connected to the cluster for the stack's life, and the sweep's pool factory."""
    if address is None:
        if resources is not None:
            raise UserError("--ray-resources: only with --ray")
        return None
    from workbench.bench import ray_backend

    shape = ray_backend.actor_shape(executors, ray_backend.parse_resources(resources) if resources else None)
    cluster = stack.enter_context(ray_backend.ray_cluster(address))
    actors = ray_backend.plan_actors(cluster, executors, shape)
    console.print(f"{cluster.describe()}; {actors.describe()}")
    return ray_backend.RayPools(actors)


def _measured(folders: list[Path], turns: str | None) -> Measured:
    """The folders' trajectories (models by their labels), their metrics and the paper's pivot."""
    from workbench.bench.budgets import default_limits, limits_note, run_budgets
    from workbench.bench.folder import read_folders
    from workbench.bench.labels import labelled
    from workbench.bench.metrics import compute
    from workbench.bench.pivot import pivot

    records = labelled(read_folders(folders))
    if not records:
        raise UserError(f"{', '.join(map(str, folders))}: no trajectories yet")
    budgets = run_budgets(folders, records)
    limits = parse_turns(turns) if turns is not None else default_limits(budgets)
    cells = compute(records, limits, budgets)
    table = pivot(records, limits[0], limits[-1], budgets)
    return Measured(records, limits, cells, table, limits_note(budgets, limits))


@app.command("metrics")
def metrics(
    folders: Folders,
    as_json: Annotated[bool, typer.Option("--json", help='Print {"turn_limits", "pivot", "cells"}.')] = False,
    turns: TurnsOption = None,
) -> None:
    """Every metric per cell (run × model × target × task × variant) and turn limit."""
    from workbench.bench.report import cells_json, paper_rows, terminal_table

    found = _measured(folders, turns)
    if as_json:
        typer.echo(cells_json(found.cells, found.pivot), nl=False)
        return
    first, last = found.limits[0], found.limits[-1]
    console = table_console()
    console.print(terminal_table(paper_rows(found.cells, first, last), first, last))
    if found.note:
        console.print(found.note)


@app.command("report")
def report(
    folders: Folders,
    md: Annotated[Path | None, typer.Option("--md", help="Write the Markdown report here.")] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Write the HTML page with plots here.")] = None,
    csv_out: Annotated[Path | None, typer.Option("--csv", help="Write every cell's metrics as CSV.")] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write every cell's metrics as JSON.")
    ] = None,
    turns: TurnsOption = None,
    title: Annotated[str, typer.Option("--title")] = "PTX Workbench benchmark",
    intervals: IntervalsOption = False,
    by_run: Annotated[
        bool, typer.Option("--by-run", help="Also print one row per run with every metric.")
    ] = False,
) -> None:
    """The paper's table (models down, tasks across, per target: correct@1, correct@T, SASS@T, best
    speedup@T) and, on request, files: Markdown, one HTML page with plots, CSV, JSON."""
    from workbench.bench.report import (
        cell_legend,
        cells_csv,
        cells_json,
        markdown,
        paper_rows,
        pivot_tables,
        terminal_table,
    )  # fmt: skip

    found = _measured(folders, turns)
    first, last = found.limits[0], found.limits[-1]
    rows = paper_rows(found.cells, first, last)
    console = table_console()
    for table in pivot_tables(found.pivot, console.width, intervals):
        console.print(table)
    if by_run:
        console.print(terminal_table(rows, first, last))
    console.print(f"T = {', '.join(map(str, found.limits))}; {cell_legend(found.pivot)}")
    if found.note:
        console.print(found.note)
    if md is not None:
        _write(md, markdown(rows, first, last, found.pivot, intervals), "a report")
    if html is not None:
        from workbench.bench.html_report import render_html

        page = render_html(found.records, rows, first, last, title, found.pivot, found.note)
        _write(html, page, "a report")
    if csv_out is not None:
        _write(csv_out, cells_csv(found.cells), "a CSV file")
    if json_out is not None:
        _write(json_out, cells_json(found.cells, found.pivot), "a JSON file")
    for path in (md, html, csv_out, json_out):
        if path is not None:
            console.print(f"wrote {path}")


@app.command("import-ptxbench")
def import_ptxbench(
    csv_path: Annotated[Path, typer.Argument(metavar="PER_TURN.csv", help="PTXBench's per-turn results.")],
    out: Annotated[Path, typer.Option("--out", help="The folder whose store gets the runs.")],
    trajectories: Annotated[
        Path | None,
        typer.Option(
            "--trajectories", help="A folder of runs (<run>/trajectories/exp_NNN.json) to import as sessions."
        ),
    ] = None,
) -> None:
    """PTXBench's published per-turn results as runs (each exp_dir one run), beside your own."""
    from workbench.bench import ptxbench

    records, sessions = ptxbench.import_ptxbench(csv_path, out, trajectories)
    runs = len({r.key.run for r in records})
    turns = sum(len(r.rows) for r in records)
    note = f", {sessions} sessions" if trajectories is not None else ""
    typer.echo(f"imported {runs} runs, {len(records)} trajectories, {turns} turns{note} into {out}")


@app.command("rejudge")
def rejudge(
    folder_path: Annotated[Path, typer.Argument(metavar="DIR", help="A sweep folder.")],
    executor: Annotated[str, typer.Option("--executor", help="static, local, or ssh://host.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the changed verdicts as JSON lines.")
    ] = False,
) -> None:
    """Judge a sweep's recorded candidates again and list the verdicts that changed."""
    import json

    from rich.table import Table

    from workbench.bench.folder import SweepFolder
    from workbench.bench.rejudge import rejudge as run_rejudge
    from workbench.evaluate.executors import make_executor

    folder = SweepFolder(folder_path)
    if not folder.has_sweep():
        raise UserError(f"{folder_path}: no sweep here")
    make_executor(executor)  # an unknown executor is one line before any work
    verdicts, written = run_rejudge(folder, executor)
    changed = [v for v in verdicts if v.changed]
    if as_json:
        for v in changed:
            line = {"session": v.recorded.session, "turn": v.recorded.turn,
                    "old": v.summary(v.recorded.old), "new": v.summary(v.new)}  # fmt: skip
            typer.echo(json.dumps(line))
        return
    console = Console(highlight=False)
    table = Table(title=f"{len(changed)} of {len(verdicts)} verdicts changed ({executor})")
    for column in ("session", "turn", "was", "now"):
        table.add_column(column)
    for v in changed:
        old, new = v.summary(v.recorded.old), v.summary(v.new)
        table.add_row(v.recorded.session, str(v.recorded.turn), str(old["status"]), str(new["status"]))
    console.print(table)
    console.print(f"every new verdict: {written}")


@app.command("rebuild")
def rebuild(folder_path: Annotated[Path, typer.Argument(metavar="DIR", help="A sweep folder.")]) -> None:
    """Make the results store again from the session files and the imported CSVs."""
    from workbench.bench.folder import SweepFolder

    folder = SweepFolder(folder_path)
    if not folder.has_sweep() and not folder.store_path.exists():
        raise UserError(f"{folder_path}: no sweep and no results store here")
    folder.rebuild()
    with folder.open_store() as store:
        records = store.records()
    typer.echo(
        f"rebuilt {folder.store_path}: {len(records)} trajectories, {sum(len(r.rows) for r in records)} turns"
    )


@app.command("view")
def view(
    folder_path: Annotated[Path, typer.Argument(metavar="DIR", help="A sweep folder (running or done).")],
    theme: Annotated[str | None, typer.Option("--theme")] = None,
) -> None:
    """The sweep screen: the grid of cells filling in live; enter opens a cell, then a trajectory's replay."""
    from workbench.bench.folder import SweepFolder
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.screens.sweep import SweepScreen

    folder = SweepFolder(folder_path)
    if not folder.has_sweep() and not folder.store_path.exists():
        raise UserError(f"{folder_path}: no sweep and no results store here")
    WorkbenchApp(lambda: SweepScreen(folder), theme=theme).run()
